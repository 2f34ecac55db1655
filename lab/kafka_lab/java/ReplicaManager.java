package kafka.server;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.zookeeper.data.Stat;

import kafka.api.LeaderAndIsr;
import kafka.cluster.Partition;
import kafka.coordinator.GroupMetadataManager;
import kafka.utils.Logger;
import kafka.utils.ZkUtils;

/**
 * Partition roles, follower fetching and ISR maintenance. Deviation from Kafka (documented): the stand-in learns
 * partition leadership by watching the state znodes in ZooKeeper instead of receiving LeaderAndIsr requests from
 * the controller; the znode contents it reads and writes are Kafka's.
 */
public final class ReplicaManager {
    private static final String LOG = "kafka.server.ReplicaManager";
    final int brokerId;
    final KafkaConfig config;
    private final ZkUtils zkUtils;
    private final ConcurrentHashMap<String, Partition> partitions = new ConcurrentHashMap<>();
    final DelayedOperationPurgatory producePurgatory = new DelayedOperationPurgatory("Produce");
    private final Map<Integer, ReplicaFetcherThread> fetchers = new HashMap<>();
    final ConcurrentHashMap<Integer, String[]> liveBrokers = new ConcurrentHashMap<>();
    private final Set<String> isrChangeSet = new LinkedHashSet<>();
    private GroupMetadataManager groupManager;
    private volatile boolean shuttingDown;

    ReplicaManager(int brokerId, KafkaConfig config, ZkUtils zkUtils) {
        this.brokerId = brokerId;
        this.config = config;
        this.zkUtils = zkUtils;
    }

    void startup(GroupMetadataManager groupManager, KafkaScheduler scheduler) throws InterruptedException {
        this.groupManager = groupManager;
        refreshBrokers();
        refreshTopics();
        scheduler.schedule("isr-expiration", this::maybeShrinkIsr, config.replicaLagTimeMaxMs / 2);
        scheduler.schedule("isr-change-propagation", this::maybePropagateIsrChanges, 1000);
        scheduler.schedule("metadata-refresh", () -> { refreshBrokers(); refreshTopics(); }, 5000);
    }

    public Partition getPartition(String key) { return partitions.get(key); }
    public Iterable<Partition> allPartitions() { return partitions.values(); }

    // ---------------------------------------------------------------- ZooKeeper-driven metadata
    void refreshBrokers() {
        try {
            List<String> ids = zkUtils.children("/brokers/ids", zkUtils.watcher(this::refreshBrokers));
            Set<Integer> seen = new HashSet<>();
            for (String id : ids) {
                String json = zkUtils.readDataMaybeNull("/brokers/ids/" + id, new Stat(), null);
                if (json == null) continue;
                int bid = Integer.parseInt(id);
                seen.add(bid);
                liveBrokers.put(bid, new String[] {ZkUtils.strField(json, "host"), String.valueOf(ZkUtils.intField(json, "port", 9092))});
            }
            liveBrokers.keySet().retainAll(seen);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    synchronized void refreshTopics() {
        try {
            for (String topic : zkUtils.children("/brokers/topics", zkUtils.watcher(this::refreshTopics))) {
                String json = zkUtils.readDataMaybeNull("/brokers/topics/" + topic, new Stat(), null);
                if (json == null) continue;
                for (Map.Entry<Integer, List<Integer>> e : parseAssignment(json).entrySet()) {
                    String key = topic + "-" + e.getKey();
                    Partition p = partitions.get(key);
                    if (p == null) {
                        p = new Partition(topic, e.getKey(), brokerId, zkUtils, e.getValue());
                        partitions.put(key, p);
                        refreshPartitionState(p);
                    } else {
                        p.setAssignedReplicas(e.getValue());
                    }
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    public static Map<Integer, List<Integer>> parseAssignment(String json) {
        Map<Integer, List<Integer>> out = new TreeMap<>();
        int i = json.indexOf("\"partitions\"");
        if (i < 0) return out;
        Matcher m = Pattern.compile("\"(\\d+)\"\\s*:\\s*\\[([^\\]]*)\\]").matcher(json.substring(i));
        while (m.find()) out.put(Integer.parseInt(m.group(1)), ZkUtils.parseInts(m.group(2)));
        return out;
    }

    void refreshPartitionState(Partition p) {
        if (shuttingDown) return;
        try {
            Stat stat = new Stat();
            String json = zkUtils.readDataMaybeNull(p.statePath(), stat, zkUtils.watcher(() -> refreshPartitionState(p)));
            if (json == null) return;
            String role = p.applyState(LeaderAndIsr.parse(json, stat.getVersion()));
            if (role == null) return;
            boolean offsets = p.topic.equals("__consumer_offsets");
            if (role.equals("leader")) {
                Logger.info("kafka.server.ReplicaFetcherManager", "[ReplicaFetcherManager on broker " + brokerId + "] Removed fetcher for partitions " + p.name());
                if (offsets) groupManager.loadGroupsForPartition(p.topic, p.partitionId);
            } else {
                if (p.assignedReplicas().contains(brokerId) && p.leader() >= 0 && hostOf(p.leader()) != null) {
                    Logger.info("kafka.server.ReplicaFetcherManager", "[ReplicaFetcherManager on broker " + brokerId + "] Added fetcher for partitions List([" + p.name()
                            + ", initOffset 0 to broker BrokerEndPoint(" + p.leader() + "," + hostOf(p.leader()) + "," + portOf(p.leader()) + ")] )");
                }
                if (offsets) groupManager.removeGroupsForPartition(p.topic, p.partitionId);
            }
            ensureFetchers();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Endpoint of a registered broker; null/-1 while it is not registered. */
    String hostOf(int id) { String[] hp = liveBrokers.get(id); return hp == null ? null : hp[0]; }
    int portOf(int id) { String[] hp = liveBrokers.get(id); return hp == null ? -1 : Integer.parseInt(hp[1]); }

    /** Partitions this broker follows from the given leader. */
    List<Partition> partitionsFollowedFrom(int leader) {
        List<Partition> out = new ArrayList<>();
        for (Partition p : partitions.values())
            if (p.leader() == leader && p.assignedReplicas().contains(brokerId)) out.add(p);
        return out;
    }

    synchronized void ensureFetchers() {
        if (shuttingDown) return;
        Set<Integer> leaders = new HashSet<>();
        for (Partition p : partitions.values()) {
            int l = p.leader();
            if (l >= 0 && l != brokerId && p.assignedReplicas().contains(brokerId)) leaders.add(l);
        }
        fetchers.entrySet().removeIf(e -> !e.getValue().isAlive());
        for (int l : leaders) {
            if (!fetchers.containsKey(l)) {
                ReplicaFetcherThread t = new ReplicaFetcherThread(this, 0, l);
                fetchers.put(l, t);
                t.start();
            }
        }
    }

    // ---------------------------------------------------------------- ISR maintenance (leader side)
    void maybeShrinkIsr() {
        for (Partition p : partitions.values()) {
            try {
                if (p.maybeShrinkIsr(config.replicaLagTimeMaxMs)) recordIsrChange(p);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    private void recordIsrChange(Partition p) {
        synchronized (isrChangeSet) { isrChangeSet.add("{\"topic\":\"" + p.topic + "\",\"partition\":" + p.partitionId + "}"); }
    }

    void maybePropagateIsrChanges() {
        List<String> changes;
        synchronized (isrChangeSet) {
            if (isrChangeSet.isEmpty()) return;
            changes = new ArrayList<>(isrChangeSet);
            isrChangeSet.clear();
        }
        try {
            zkUtils.createPersistentSequential("/isr_change_notification/isr_change_", "{\"version\":1,\"partitions\":[" + String.join(",", changes) + "]}");
        } catch (Exception e) {
            Logger.warn(LOG, "[Replica Manager on Broker " + brokerId + "]: Failed to write isr change notification: " + e);
        }
    }

    /** Fetch from a follower (replicaId >= 0) or a consumer (-1). Returns Kafka error codes per partition. */
    Map<String, Short> fetchMessages(int replicaId, List<String[]> requested) throws InterruptedException {
        Map<String, Short> errors = new java.util.LinkedHashMap<>();
        long now = System.currentTimeMillis();
        for (String[] tp : requested) {
            String key = tp[0] + "-" + tp[1];
            Partition p = partitions.get(key);
            short err = p == null ? (short) 3 : (p.isLocalLeader() ? (short) 0 : (short) 6); // UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_FOR_PARTITION
            errors.put(key, err);
        }
        if (replicaId >= 0) updateFollowerLogReadResults(replicaId, requested, now);
        return errors;
    }

    private void updateFollowerLogReadResults(int replicaId, List<String[]> requested, long now) throws InterruptedException {
        for (String[] tp : requested) {
            String key = tp[0] + "-" + tp[1];
            Partition p = partitions.get(key);
            if (p == null || !p.isLocalLeader()) continue;
            p.updateReplicaLogReadResult(replicaId, now);
            tryCompleteDelayedProduce(key);
        }
    }

    public void tryCompleteDelayedProduce(String key) { producePurgatory.checkAndComplete(key); }

    /** Append with acks=-1: the response waits in the produce purgatory until the ISR has the data. */
    public void appendMessages(String key, Runnable responseCallback) {
        DelayedProduce op = new DelayedProduce(responseCallback);
        producePurgatory.watch(key, op);
    }

    void shutdown() {
        shuttingDown = true;
        List<ReplicaFetcherThread> ts;
        synchronized (this) { ts = new ArrayList<>(fetchers.values()); }
        for (ReplicaFetcherThread t : ts) t.initiateShutdown();
    }

    boolean isShuttingDown() { return shuttingDown; }
}

final class DelayedProduce extends DelayedOperationPurgatory.DelayedOperation {
    private final Runnable responseCallback;

    DelayedProduce(Runnable responseCallback) { this.responseCallback = responseCallback; }

    @Override
    public boolean tryComplete() {
        // Completes once the follower fetch that satisfies acks=-1 is processed; under the lab's injected race this
        // is the fetch handled by kafka-request-handler-3 while group-metadata-manager-0 holds the group.
        if (LabFaultInjector.deadlockArmed && Thread.currentThread().getName().equals(LabFaultInjector.handlerThread)) {
            LabFaultInjector.purgatoryLockedAwaitGroup();
            return forceComplete();
        }
        return false;
    }

    @Override
    public void onComplete() { responseCallback.run(); }
}

final class ReplicaFetcherThread extends Thread {
    private static final String LOG = "kafka.server.ReplicaFetcherThread";
    private final ReplicaManager rm;
    private final int sourceBroker;
    private volatile boolean running = true;
    private Socket socket;
    private int correlationId;

    /** What the fetcher sends; its default toString is what Kafka's WARN line prints. */
    static final class FetchRequest {
        final List<Partition> partitions;
        FetchRequest(List<Partition> partitions) { this.partitions = partitions; }
    }

    private static final String[] DISCONNECTED_TRACE = {
        "\tat kafka.utils.NetworkClientBlockingOps$$anonfun$blockingSendAndReceive$extension$1$$anonfun$apply$1.apply(NetworkClientBlockingOps.scala:115)",
        "\tat kafka.utils.NetworkClientBlockingOps$$anonfun$blockingSendAndReceive$extension$1$$anonfun$apply$1.apply(NetworkClientBlockingOps.scala:112)",
        "\tat scala.Option.foreach(Option.scala:257)",
        "\tat kafka.utils.NetworkClientBlockingOps$$anonfun$blockingSendAndReceive$extension$1.apply(NetworkClientBlockingOps.scala:112)",
        "\tat kafka.utils.NetworkClientBlockingOps$$anonfun$blockingSendAndReceive$extension$1.apply(NetworkClientBlockingOps.scala:108)",
        "\tat kafka.utils.NetworkClientBlockingOps$.recursivePoll$1(NetworkClientBlockingOps.scala:137)",
        "\tat kafka.utils.NetworkClientBlockingOps$.kafka$utils$NetworkClientBlockingOps$$pollContinuously$extension(NetworkClientBlockingOps.scala:143)",
        "\tat kafka.utils.NetworkClientBlockingOps$.blockingSendAndReceive$extension(NetworkClientBlockingOps.scala:108)",
        "\tat kafka.server.ReplicaFetcherThread.sendRequest(ReplicaFetcherThread.scala:253)",
        "\tat kafka.server.ReplicaFetcherThread.fetch(ReplicaFetcherThread.scala:238)",
        "\tat kafka.server.ReplicaFetcherThread.fetch(ReplicaFetcherThread.scala:42)",
        "\tat kafka.server.AbstractFetcherThread.processFetchRequest(AbstractFetcherThread.scala:118)",
        "\tat kafka.server.AbstractFetcherThread.doWork(AbstractFetcherThread.scala:103)",
        "\tat kafka.utils.ShutdownableThread.run(ShutdownableThread.scala:63)",
    };
    private static final String[] CONNECT_TRACE = {
        "\tat kafka.utils.NetworkClientBlockingOps$.awaitReady$1(NetworkClientBlockingOps.scala:83)",
        "\tat kafka.utils.NetworkClientBlockingOps$.blockingReady$extension(NetworkClientBlockingOps.scala:93)",
        "\tat kafka.server.ReplicaFetcherThread.sendRequest(ReplicaFetcherThread.scala:248)",
        "\tat kafka.server.ReplicaFetcherThread.fetch(ReplicaFetcherThread.scala:238)",
        "\tat kafka.server.ReplicaFetcherThread.fetch(ReplicaFetcherThread.scala:42)",
        "\tat kafka.server.AbstractFetcherThread.processFetchRequest(AbstractFetcherThread.scala:118)",
        "\tat kafka.server.AbstractFetcherThread.doWork(AbstractFetcherThread.scala:103)",
        "\tat kafka.utils.ShutdownableThread.run(ShutdownableThread.scala:63)",
    };

    ReplicaFetcherThread(ReplicaManager rm, int fetcherId, int sourceBroker) {
        super("ReplicaFetcherThread-" + fetcherId + "-" + sourceBroker);
        this.rm = rm;
        this.sourceBroker = sourceBroker;
        setDaemon(true);
    }

    void initiateShutdown() {
        running = false;
        closeSocket();
    }

    @Override
    public void run() {
        Logger.info(LOG, "[" + getName() + "], Starting ");
        while (running && !rm.isShuttingDown()) {
            List<Partition> parts = rm.partitionsFollowedFrom(sourceBroker);
            if (parts.isEmpty()) break;
            FetchRequest req = new FetchRequest(parts);
            try {
                fetch(req);
                sleepMs(rm.config.replicaFetchWaitMs);
            } catch (IOException e) {
                closeSocket();
                if (!running) break;
                if (e.getMessage() != null && e.getMessage().contains("failed")) {
                    Logger.warn(LOG, "[" + getName() + "], Error in fetch " + req, concat("java.io.IOException: " + e.getMessage(), CONNECT_TRACE));
                } else {
                    Logger.warn(LOG, "[" + getName() + "], Error in fetch " + req,
                            concat("java.io.IOException: Connection to " + sourceBroker + " was disconnected before the response was read", DISCONNECTED_TRACE));
                }
                sleepMs(rm.config.replicaFetchBackoffMs);
            }
        }
        closeSocket();
        Logger.info(LOG, "[" + getName() + "], Stopped ");
        rm.ensureFetchers();
    }

    private static String[] concat(String first, String[] rest) {
        String[] out = new String[rest.length + 1];
        out[0] = first;
        System.arraycopy(rest, 0, out, 1, rest.length);
        return out;
    }

    private void sleepMs(long ms) {
        try { Thread.sleep(ms); } catch (InterruptedException e) { running = false; }
    }

    private synchronized void closeSocket() {
        if (socket != null) {
            try { socket.close(); } catch (IOException ignored) { }
            socket = null;
        }
    }

    private void fetch(FetchRequest req) throws IOException {
        Socket s;
        synchronized (this) { s = socket; }
        if (s == null) {
            String host = rm.hostOf(sourceBroker);
            int port = rm.portOf(sourceBroker);
            if (host == null) { // leader not registered (yet): wait for its registration like a fetcher waiting for metadata
                rm.refreshBrokers();
                host = rm.hostOf(sourceBroker);
                port = rm.portOf(sourceBroker);
                if (host == null) return;
            }
            s = new Socket();
            try {
                s.bind(new InetSocketAddress(rm.config.host, 0)); // connect from this host's own address
                s.connect(new InetSocketAddress(host, port), rm.config.replicaSocketTimeoutMs);
            } catch (IOException e) {
                try { s.close(); } catch (IOException ignored) { }
                throw new IOException("Connection to " + host + ":" + port + " (id: " + sourceBroker + " rack: null) failed");
            }
            s.setSoTimeout(rm.config.replicaSocketTimeoutMs);
            s.setTcpNoDelay(true);
            synchronized (this) { socket = s; }
        }
        // Fetch v3 (0.10.1): replica_id, max_wait_time, min_bytes, max_bytes, [topic [partition fetch_offset max_bytes]]
        Map<String, List<Integer>> byTopic = new TreeMap<>();
        for (Partition p : req.partitions) byTopic.computeIfAbsent(p.topic, k -> new ArrayList<>()).add(p.partitionId);
        java.io.ByteArrayOutputStream bo = new java.io.ByteArrayOutputStream();
        DataOutputStream d = new DataOutputStream(bo);
        int corr = ++correlationId;
        d.writeShort(1); d.writeShort(3); d.writeInt(corr); writeString(d, getName());
        d.writeInt(rm.brokerId); d.writeInt(rm.config.replicaFetchWaitMs); d.writeInt(1); d.writeInt(10485760);
        d.writeInt(byTopic.size());
        for (Map.Entry<String, List<Integer>> e : byTopic.entrySet()) {
            writeString(d, e.getKey());
            d.writeInt(e.getValue().size());
            for (int pid : e.getValue()) { d.writeInt(pid); d.writeLong(0L); d.writeInt(1048576); }
        }
        byte[] body = bo.toByteArray();
        DataOutputStream out = new DataOutputStream(s.getOutputStream());
        out.writeInt(body.length);
        out.write(body);
        out.flush();
        DataInputStream in = new DataInputStream(s.getInputStream());
        try {
            int size = in.readInt();
            byte[] resp = new byte[size];
            in.readFully(resp);
        } catch (java.net.SocketTimeoutException | EOFException e) {
            throw new IOException("disconnected");
        }
    }

    private static void writeString(DataOutputStream d, String s) throws IOException {
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        d.writeShort(b.length);
        d.write(b);
    }
}
