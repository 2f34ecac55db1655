package kafka.cluster;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import kafka.api.LeaderAndIsr;
import kafka.utils.Logger;
import kafka.utils.ZkUtils;

/**
 * One partition as seen by one broker. The leader maintains the ISR like Kafka 0.10.1's Partition:
 * shrink (isr-expiration task) when a follower has not fetched for replica.lag.time.max.ms, expand when an
 * out-of-sync assigned follower fetches again. Leader-driven ISR changes keep leader_epoch unchanged (as Kafka
 * does); only the controller bumps leader_epoch (leader election, removal of a dead replica).
 * The stand-in has no message log: a follower that fetches is considered caught up.
 */
public final class Partition {
    private static final String LOG = "kafka.cluster.Partition";
    public final String topic;
    public final int partitionId;
    private final int localBrokerId;
    private final ZkUtils zkUtils;
    private final Object leaderIsrUpdateLock = new Object();
    private volatile List<Integer> assignedReplicas;
    private volatile LeaderAndIsr state;
    private final Map<Integer, Long> lastCaughtUpTimeMs = new HashMap<>();

    public Partition(String topic, int partitionId, int localBrokerId, ZkUtils zkUtils, List<Integer> assigned) {
        this.topic = topic;
        this.partitionId = partitionId;
        this.localBrokerId = localBrokerId;
        this.zkUtils = zkUtils;
        this.assignedReplicas = assigned;
    }

    public String statePath() { return "/brokers/topics/" + topic + "/partitions/" + partitionId + "/state"; }
    public String name() { return "[" + topic + "," + partitionId + "]"; }
    public List<Integer> assignedReplicas() { return assignedReplicas; }
    public void setAssignedReplicas(List<Integer> a) { assignedReplicas = a; }
    public LeaderAndIsr state() { return state; }
    public boolean isLocalLeader() { LeaderAndIsr s = state; return s != null && s.leader == localBrokerId; }
    public int leader() { LeaderAndIsr s = state; return s == null ? -1 : s.leader; }

    /** Applies the state read from ZooKeeper; returns "leader"/"follower" when this broker's role changed. */
    public String applyState(LeaderAndIsr s) {
        synchronized (leaderIsrUpdateLock) {
            LeaderAndIsr old = state;
            if (old != null && old.zkVersion >= s.zkVersion) return null;
            state = s;
            boolean wasLeader = old != null && old.leader == localBrokerId;
            boolean leaderNow = s.leader == localBrokerId;
            if (leaderNow && (!wasLeader || old.leaderEpoch != s.leaderEpoch)) {
                long now = System.currentTimeMillis();
                for (int r : assignedReplicas) lastCaughtUpTimeMs.put(r, now);
                return "leader";
            }
            if (!leaderNow && (old == null || wasLeader || old.leader != s.leader)) return "follower";
            return null;
        }
    }

    /** Follower fetch arrived on a request handler thread (ReplicaManager.updateFollowerLogReadResults). */
    public void updateReplicaLogReadResult(int replicaId, long fetchTimeMs) throws InterruptedException {
        synchronized (leaderIsrUpdateLock) {
            lastCaughtUpTimeMs.put(replicaId, fetchTimeMs);
            maybeExpandIsr(replicaId);
        }
    }

    private void maybeExpandIsr(int replicaId) throws InterruptedException {
        LeaderAndIsr s = state;
        if (s == null || s.leader != localBrokerId) return;
        if (s.isr.contains(replicaId) || !assignedReplicas.contains(replicaId)) return;
        List<Integer> newIsr = new ArrayList<>(s.isr);
        newIsr.add(replicaId);
        Logger.info(LOG, "Partition " + name() + " on broker " + localBrokerId + ": Expanding ISR for partition " + name()
                + " from " + ZkUtils.csv(s.isr) + " to " + ZkUtils.csv(newIsr));
        updateIsr(s, newIsr);
    }

    /** isr-expiration task (kafka-scheduler thread). */
    public boolean maybeShrinkIsr(long maxLagMs) throws InterruptedException {
        synchronized (leaderIsrUpdateLock) {
            LeaderAndIsr s = state;
            if (s == null || s.leader != localBrokerId) return false;
            long now = System.currentTimeMillis();
            List<Integer> newIsr = new ArrayList<>();
            for (int r : s.isr) {
                Long t = lastCaughtUpTimeMs.get(r);
                if (r == localBrokerId || (t != null && now - t <= maxLagMs)) newIsr.add(r);
            }
            if (newIsr.size() == s.isr.size()) return false;
            Logger.info(LOG, "Partition " + name() + " on broker " + localBrokerId + ": Shrinking ISR for partition " + name()
                    + " from " + ZkUtils.csv(s.isr) + " to " + ZkUtils.csv(newIsr));
            return updateIsr(s, newIsr);
        }
    }

    /** Appending to the leader's log may unblock delayed produce/fetch requests waiting on this partition. */
    public void appendMessagesToLeader(kafka.server.ReplicaManager replicaManager) {
        tryCompleteDelayedRequests(replicaManager);
    }

    private void tryCompleteDelayedRequests(kafka.server.ReplicaManager replicaManager) {
        replicaManager.tryCompleteDelayedProduce(topic + "-" + partitionId);
    }

    private boolean updateIsr(LeaderAndIsr s, List<Integer> newIsr) throws InterruptedException {
        // Kafka keeps leader_epoch (and the controller_epoch it got from the controller) on leader-driven ISR changes.
        LeaderAndIsr n = new LeaderAndIsr(s.leader, s.leaderEpoch, newIsr, s.controllerEpoch, s.zkVersion);
        int v = zkUtils.conditionalUpdate(statePath(), n.toJson(), s.zkVersion);
        if (v < 0) {
            Logger.info(LOG, "Partition " + name() + " on broker " + localBrokerId + ": Cached zkVersion [" + s.zkVersion
                    + "] not equal to that in zookeeper, skip updating ISR");
            return false;
        }
        state = new LeaderAndIsr(s.leader, s.leaderEpoch, newIsr, s.controllerEpoch, v);
        return true;
    }
}
