package kafka.controller;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

import kafka.api.LeaderAndIsr;
import kafka.server.ReplicaManager;
import kafka.utils.Logger;
import kafka.utils.ZkUtils;

/**
 * Controller duties of Kafka 0.10.1 that show in ZooKeeper: first-come election on /controller, epoch bump on
 * /controller_epoch, broker-change handling (OfflinePartitionLeaderSelector + removal of dead replicas from the ISR,
 * both bumping leader_epoch), leader election for offline partitions when a broker comes back, and consumption of
 * /isr_change_notification. auto.leader.rebalance (preferred-leader election) is not implemented: the lab runs
 * with auto.leader.rebalance.enable=false. All work runs on the ZkClient event thread, like Kafka 0.10.
 */
public final class KafkaController {
    private static final String SEL = "kafka.controller.OfflinePartitionLeaderSelector";
    private final int brokerId;
    private final ZkUtils zk;
    private final boolean uncleanLeaderElection;
    private volatile boolean active;
    private volatile boolean shuttingDown;
    private int epoch;
    private Set<Integer> liveBrokers = new TreeSet<>();

    public KafkaController(int brokerId, ZkUtils zk, boolean uncleanLeaderElection) {
        this.brokerId = brokerId;
        this.zk = zk;
        this.uncleanLeaderElection = uncleanLeaderElection;
    }

    private static void log(String logger, String msg) { Logger.controllerInfo(logger, msg); }
    private String p() { return "[Controller " + brokerId + "]: "; }

    public void startup() {
        log("kafka.controller.KafkaController", p() + "Controller starting up");
        zk.enqueue(this::elect);
        log("kafka.controller.KafkaController", p() + "Controller startup complete");
    }

    public void onNewSession() {
        active = false;
        zk.enqueue(this::elect);
    }

    private void elect() {
        if (shuttingDown) return;
        try {
            String json = "{\"version\":1,\"brokerid\":" + brokerId + ",\"timestamp\":\"" + System.currentTimeMillis() + "\"}";
            try {
                zk.createEphemeral("/controller", json);
                log("kafka.server.ZookeeperLeaderElector", brokerId + " successfully elected as leader");
                onControllerFailover();
            } catch (KeeperException.NodeExistsException e) {
                String cur = zk.readDataMaybeNull("/controller", new Stat(), null);
                if (cur != null) log("kafka.server.ZookeeperLeaderElector", "Broker " + ZkUtils.intField(cur, "brokerid", -1) + " was elected as leader instead of broker " + brokerId);
            }
            // watch for controller failure
            if (zk.zk().exists("/controller", zk.watcher(this::elect)) == null) zk.enqueue(this::elect);
        } catch (Exception e) {
            Logger.error("kafka.server.ZookeeperLeaderElector", "Error while electing or becoming leader on broker " + brokerId, e.toString());
        }
    }

    private void onControllerFailover() throws Exception {
        log("kafka.controller.KafkaController", p() + "Broker " + brokerId + " starting become controller state transition");
        Stat st = new Stat();
        String cur = zk.readDataMaybeNull("/controller_epoch", st, null);
        if (cur == null) {
            epoch = 1;
            zk.createPersistent("/controller_epoch", "1");
        } else {
            epoch = Integer.parseInt(cur.trim()) + 1;
            if (zk.conditionalUpdate("/controller_epoch", String.valueOf(epoch), st.getVersion()) < 0)
                throw new IllegalStateException("controller moved while incrementing the epoch");
        }
        log("kafka.controller.KafkaController", p() + "Controller " + brokerId + " incremented epoch to " + epoch);
        active = true;
        liveBrokers = new TreeSet<>();
        onBrokerChange(true);
        onTopicChange();
        onIsrChange();
        log("kafka.controller.KafkaController", p() + "Broker " + brokerId + " is ready to serve as the new controller with epoch " + epoch);
    }

    private boolean stillController() {
        String cur = null;
        try { cur = zk.readDataMaybeNull("/controller", new Stat(), null); } catch (InterruptedException ignored) { }
        return cur != null && ZkUtils.intField(cur, "brokerid", -1) == brokerId;
    }

    private void onBrokerChange() { onBrokerChange(false); }

    private void onBrokerChange(boolean failover) {
        if (!active || shuttingDown) return;
        try {
            List<String> ids = zk.children("/brokers/ids", zk.watcher(this::onBrokerChange));
            if (!stillController()) { active = false; return; }
            Set<Integer> now = new TreeSet<>();
            for (String s : ids) now.add(Integer.parseInt(s));
            Set<Integer> added = new TreeSet<>(now);
            added.removeAll(liveBrokers);
            Set<Integer> dead = new TreeSet<>(liveBrokers);
            dead.removeAll(now);
            if (failover) dead.clear();
            String L = "kafka.controller.ReplicaStateMachine$BrokerChangeListener";
            String pre = "[BrokerChangeListener on Controller " + brokerId + "]: ";
            log(L, pre + "Broker change listener fired for path /brokers/ids with children " + String.join(",", ids));
            log(L, pre + "Newly added brokers: " + csv(added) + ", deleted brokers: " + csv(dead) + ", all live brokers: " + csv(now));
            liveBrokers = now;
            if (!dead.isEmpty()) log("kafka.controller.KafkaController", p() + "Broker failure callback for " + csv(dead));
            if (!added.isEmpty() && !failover) log("kafka.controller.KafkaController", p() + "New broker startup callback for " + csv(added));
            for (String topic : zk.children("/brokers/topics", null)) {
                String a = zk.readDataMaybeNull("/brokers/topics/" + topic, new Stat(), null);
                if (a == null) continue;
                for (Map.Entry<Integer, List<Integer>> e : ReplicaManager.parseAssignment(a).entrySet())
                    updatePartition(topic, e.getKey(), e.getValue(), dead);
            }
        } catch (Exception e) {
            Logger.error("kafka.controller.KafkaController", p() + "Error while handling broker changes", e.toString());
        }
    }

    private void updatePartition(String topic, int partition, List<Integer> assigned, Set<Integer> dead) throws InterruptedException {
        String path = "/brokers/topics/" + topic + "/partitions/" + partition + "/state";
        for (int attempt = 0; attempt < 10; attempt++) {
            Stat st = new Stat();
            String json = zk.readDataMaybeNull(path, st, null);
            if (json == null) return;
            LeaderAndIsr s = LeaderAndIsr.parse(json, st.getVersion());
            LeaderAndIsr n = null;
            String name = "[" + topic + "," + partition + "]";
            if (s.leader == LeaderAndIsr.NO_LEADER || !liveBrokers.contains(s.leader)) {
                List<Integer> liveIsr = new ArrayList<>();
                for (int r : s.isr) if (liveBrokers.contains(r)) liveIsr.add(r);
                Integer newLeader = null;
                for (int r : assigned) if (liveIsr.contains(r)) { newLeader = r; break; }
                if (newLeader == null && uncleanLeaderElection) {
                    for (int r : assigned) if (liveBrokers.contains(r)) { newLeader = r; liveIsr = new ArrayList<>(List.of(r)); break; }
                }
                if (newLeader != null) {
                    n = new LeaderAndIsr(newLeader, s.leaderEpoch + 1, liveIsr, epoch, s.zkVersion);
                    log(SEL, "[OfflinePartitionLeaderSelector]: Selected new leader and ISR {\"leader\":" + newLeader + ",\"leader_epoch\":" + n.leaderEpoch
                            + ",\"isr\":[" + ZkUtils.csv(liveIsr) + "]} for offline partition " + name);
                } else if (s.leader != LeaderAndIsr.NO_LEADER) {
                    // removeReplicaFromIsr: leader becomes -1; with unclean election disabled the last ISR member is kept
                    List<Integer> newIsr = new ArrayList<>(s.isr);
                    newIsr.removeAll(dead);
                    if (newIsr.isEmpty() && !uncleanLeaderElection) newIsr = new ArrayList<>(s.isr);
                    n = new LeaderAndIsr(LeaderAndIsr.NO_LEADER, s.leaderEpoch + 1, newIsr, epoch, s.zkVersion);
                    Logger.controllerInfo("state.change.logger", "Controller " + brokerId + " epoch " + epoch + " encountered error while electing leader for partition "
                            + name + " due to: No replica in ISR for partition " + name + " is alive. Live brokers are: [" + csv(liveBrokers) + "], ISR brokers are: [" + ZkUtils.csv(s.isr) + "]");
                }
            } else {
                List<Integer> newIsr = new ArrayList<>(s.isr);
                if (newIsr.removeAll(dead)) {
                    n = new LeaderAndIsr(s.leader, s.leaderEpoch + 1, newIsr, epoch, s.zkVersion);
                    log("kafka.controller.KafkaController", p() + "New leader and ISR for partition " + name + " is {\"leader\":" + n.leader
                            + ",\"leader_epoch\":" + n.leaderEpoch + ",\"isr\":[" + ZkUtils.csv(newIsr) + "]}");
                }
            }
            if (n == null) return;
            if (zk.conditionalUpdate(path, n.toJson(), s.zkVersion) >= 0) return;
        }
    }

    /** TopicChangeListener: new partitions go NewPartition -> OnlinePartition (leader = first live assigned replica). */
    private void onTopicChange() {
        if (!active || shuttingDown) return;
        try {
            for (String topic : zk.children("/brokers/topics", zk.watcher(this::onTopicChange))) {
                String a = zk.readDataMaybeNull("/brokers/topics/" + topic, new Stat(), null);
                if (a == null) continue;
                for (Map.Entry<Integer, List<Integer>> e : ReplicaManager.parseAssignment(a).entrySet()) {
                    String path = "/brokers/topics/" + topic + "/partitions/" + e.getKey() + "/state";
                    if (zk.zk().exists(path, false) != null) continue;
                    List<Integer> live = new ArrayList<>();
                    for (int r : e.getValue()) if (liveBrokers.contains(r)) live.add(r);
                    if (live.isEmpty()) continue;
                    LeaderAndIsr s = new LeaderAndIsr(live.get(0), 0, live, epoch, 0);
                    zk.ensurePersistent("/brokers/topics/" + topic + "/partitions/" + e.getKey());
                    try {
                        zk.createPersistent(path, s.toJson());
                        Logger.controllerInfo("state.change.logger", "Controller " + brokerId + " epoch " + epoch + " changed partition [" + topic + "," + e.getKey()
                                + "] from NewPartition to OnlinePartition with leader " + s.leader);
                    } catch (KeeperException.NodeExistsException ignored) {
                    }
                }
            }
        } catch (Exception e) {
            Logger.error("kafka.controller.KafkaController", p() + "Error while handling new topics", e.toString());
        }
    }

    private void onIsrChange() {
        if (!active || shuttingDown) return;
        try {
            List<String> children = zk.children("/isr_change_notification", zk.watcher(this::onIsrChange));
            for (String c : children) {
                try { zk.zk().delete("/isr_change_notification/" + c, -1); } catch (KeeperException ignored) { }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static String csv(Set<Integer> s) { return ZkUtils.csv(new ArrayList<>(s)); }

    public void shutdown() {
        shuttingDown = true;
        active = false;
        log("kafka.controller.KafkaController", p() + "Controller shutdown complete");
    }
}
