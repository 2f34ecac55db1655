package kafka.server;

import java.io.File;
import java.io.FileWriter;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.zookeeper.KeeperException;

import kafka.cluster.Partition;
import kafka.controller.KafkaController;
import kafka.coordinator.GroupCoordinator;
import kafka.coordinator.GroupMetadata;
import kafka.coordinator.GroupMetadataManager;
import kafka.network.RequestChannel;
import kafka.network.SocketServer;
import kafka.utils.Logger;
import kafka.utils.ZkUtils;

final class KafkaConfig {
    final int brokerId;
    final String host;
    final int port;
    final String zkConnect;
    final int zkSessionTimeoutMs;
    final int numNetworkThreads;
    final int numIoThreads;
    final int queuedMaxRequests;
    final long replicaLagTimeMaxMs;
    final int replicaSocketTimeoutMs;
    final int replicaFetchWaitMs;
    final int replicaFetchBackoffMs;
    final long offsetsRetentionCheckIntervalMs;
    final boolean uncleanLeaderElection;
    final String logDir;
    final String readyFile;

    KafkaConfig(Properties p) {
        brokerId = Integer.parseInt(p.getProperty("broker.id"));
        String listener = p.getProperty("listeners", "PLAINTEXT://127.0.0.1:9092");
        String hp = listener.substring(listener.indexOf("//") + 2);
        host = hp.substring(0, hp.lastIndexOf(':'));
        port = Integer.parseInt(hp.substring(hp.lastIndexOf(':') + 1));
        zkConnect = p.getProperty("zookeeper.connect");
        zkSessionTimeoutMs = Integer.parseInt(p.getProperty("zookeeper.session.timeout.ms", "6000"));
        numNetworkThreads = Integer.parseInt(p.getProperty("num.network.threads", "3"));
        numIoThreads = Integer.parseInt(p.getProperty("num.io.threads", "8"));
        queuedMaxRequests = Integer.parseInt(p.getProperty("queued.max.requests", "500"));
        replicaLagTimeMaxMs = Long.parseLong(p.getProperty("replica.lag.time.max.ms", "10000"));
        replicaSocketTimeoutMs = Integer.parseInt(p.getProperty("replica.socket.timeout.ms", "30000"));
        replicaFetchWaitMs = Integer.parseInt(p.getProperty("replica.fetch.wait.max.ms", "500"));
        replicaFetchBackoffMs = Integer.parseInt(p.getProperty("replica.fetch.backoff.ms", "1000"));
        offsetsRetentionCheckIntervalMs = Long.parseLong(p.getProperty("offsets.retention.check.interval.ms", "600000"));
        uncleanLeaderElection = Boolean.parseBoolean(p.getProperty("unclean.leader.election.enable", "true"));
        logDir = p.getProperty("kafka.logs.dir", "logs");
        readyFile = p.getProperty("lab.ready.file", "");
    }
}

final class KafkaScheduler {
    private final ScheduledThreadPoolExecutor executor;

    KafkaScheduler(int threads) {
        AtomicInteger n = new AtomicInteger();
        executor = new ScheduledThreadPoolExecutor(threads, r -> {
            Thread t = new Thread(r, "kafka-scheduler-" + n.getAndIncrement());
            t.setDaemon(true);
            return t;
        });
    }

    void schedule(String name, Runnable task, long periodMs) {
        executor.scheduleAtFixedRate(() -> {
            try {
                task.run();
            } catch (Throwable t) {
                Logger.error("kafka.utils.KafkaScheduler", "Uncaught exception in scheduled task '" + name + "'", t.toString());
            }
        }, periodMs, periodMs, TimeUnit.MILLISECONDS);
    }

    void shutdown() { executor.shutdownNow(); }
}

final class KafkaApis {
    private final KafkaServer server;

    KafkaApis(KafkaServer server) { this.server = server; }

    void handle(RequestChannel.Request req) throws InterruptedException {
        switch (req.apiKey) {
            case 1: handleFetchRequest(req); break;
            case 0: handleProducerRequest(req); break;
            case 3: handleTopicMetadataRequest(req); break;
            case 12: handleHeartbeatRequest(req); break;
            case 18: handleApiVersionsRequest(req); break;
            default:
                // A real 0.10.1 broker implements this API; the lab stand-in does not, and says so instead of faking it.
                Logger.warn("kafka.server.KafkaApis", "[KafkaApi-" + server.config.brokerId + "] lab stand-in: api_key " + req.apiKey
                        + " is not implemented; closing connection " + req.connectionId);
                server.socketServer.requestChannel.sendResponse(req, null);
        }
    }

    private static String readString(ByteBuffer b) {
        short len = b.getShort();
        if (len < 0) return null;
        byte[] bytes = new byte[len];
        b.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    private static void writeString(ByteBuffer b, String s) {
        byte[] bytes = s.getBytes(StandardCharsets.UTF_8);
        b.putShort((short) bytes.length).put(bytes);
    }

    private void handleFetchRequest(RequestChannel.Request req) throws InterruptedException {
        ByteBuffer b = req.body;
        int replicaId = b.getInt();
        b.getInt(); // max_wait_time
        b.getInt(); // min_bytes
        if (req.apiVersion >= 3) b.getInt(); // max_bytes
        List<String[]> requested = new ArrayList<>();
        int topics = b.getInt();
        for (int i = 0; i < topics; i++) {
            String topic = readString(b);
            int n = b.getInt();
            for (int j = 0; j < n; j++) {
                int pid = b.getInt();
                b.getLong();
                b.getInt();
                requested.add(new String[] {topic, String.valueOf(pid)});
            }
        }
        Map<String, Short> errors = server.replicaManager.fetchMessages(replicaId, requested);
        ByteBuffer out = ByteBuffer.allocate(64 + requested.size() * 64);
        if (req.apiVersion >= 1) out.putInt(0); // throttle_time_ms
        // group by topic, in request order
        List<String> topicOrder = new ArrayList<>();
        for (String[] tp : requested) if (!topicOrder.contains(tp[0])) topicOrder.add(tp[0]);
        out.putInt(topicOrder.size());
        for (String t : topicOrder) {
            writeString(out, t);
            int count = 0;
            for (String[] tp : requested) if (tp[0].equals(t)) count++;
            out.putInt(count);
            for (String[] tp : requested) {
                if (!tp[0].equals(t)) continue;
                out.putInt(Integer.parseInt(tp[1]));
                out.putShort(errors.get(tp[0] + "-" + tp[1]));
                out.putLong(0L); // high watermark: the stand-in stores no messages
                out.putInt(0); // empty message set
            }
        }
        out.flip();
        server.socketServer.requestChannel.sendResponse(req, out);
    }

    private void handleProducerRequest(RequestChannel.Request req) {
        // The stand-in stores no messages; it answers with an empty response list (v1+: throttle_time_ms).
        ByteBuffer out = ByteBuffer.allocate(8);
        out.putInt(0);
        if (req.apiVersion >= 1) out.putInt(0);
        out.flip();
        server.socketServer.requestChannel.sendResponse(req, out);
    }

    private void handleTopicMetadataRequest(RequestChannel.Request req) {
        // Metadata v0 response built from the broker's view of ZooKeeper (brokers, then all topics).
        ReplicaManager rm = server.replicaManager;
        ByteBuffer out = ByteBuffer.allocate(256 * 1024);
        java.util.TreeMap<Integer, String[]> brokers = new java.util.TreeMap<>(rm.liveBrokers);
        out.putInt(brokers.size());
        for (Map.Entry<Integer, String[]> e : brokers.entrySet()) {
            out.putInt(e.getKey());
            writeString(out, e.getValue()[0]);
            out.putInt(Integer.parseInt(e.getValue()[1]));
        }
        java.util.TreeMap<String, List<Partition>> byTopic = new java.util.TreeMap<>();
        for (Partition p : rm.allPartitions()) byTopic.computeIfAbsent(p.topic, k -> new ArrayList<>()).add(p);
        out.putInt(byTopic.size());
        for (Map.Entry<String, List<Partition>> e : byTopic.entrySet()) {
            out.putShort((short) 0);
            writeString(out, e.getKey());
            e.getValue().sort((a, c) -> Integer.compare(a.partitionId, c.partitionId));
            out.putInt(e.getValue().size());
            for (Partition p : e.getValue()) {
                kafka.api.LeaderAndIsr s = p.state();
                out.putShort((short) (s == null || s.leader < 0 ? 5 : 0)); // LEADER_NOT_AVAILABLE
                out.putInt(p.partitionId);
                out.putInt(s == null ? -1 : s.leader);
                out.putInt(p.assignedReplicas().size());
                for (int r : p.assignedReplicas()) out.putInt(r);
                List<Integer> isr = s == null ? new ArrayList<>() : s.isr;
                out.putInt(isr.size());
                for (int r : isr) out.putInt(r);
            }
        }
        out.flip();
        server.socketServer.requestChannel.sendResponse(req, out);
    }

    private void handleHeartbeatRequest(RequestChannel.Request req) {
        ByteBuffer b = req.body;
        String groupId = readString(b);
        int generation = b.getInt();
        String memberId = readString(b);
        short err = server.groupCoordinator.handleHeartbeat(groupId, memberId, generation);
        ByteBuffer out = ByteBuffer.allocate(2);
        out.putShort(err).flip();
        server.socketServer.requestChannel.sendResponse(req, out);
    }

    private static final short[][] API_VERSIONS = {
        {0, 0, 2}, {1, 0, 3}, {2, 0, 1}, {3, 0, 2}, {4, 0, 0}, {5, 0, 0}, {6, 0, 2}, {7, 1, 1}, {8, 0, 2}, {9, 0, 1},
        {10, 0, 0}, {11, 0, 1}, {12, 0, 0}, {13, 0, 0}, {14, 0, 0}, {15, 0, 0}, {16, 0, 0}, {17, 0, 0}, {18, 0, 0},
        {19, 0, 0}, {20, 0, 0}};

    private void handleApiVersionsRequest(RequestChannel.Request req) {
        ByteBuffer out = ByteBuffer.allocate(2 + 4 + API_VERSIONS.length * 6);
        out.putShort((short) 0).putInt(API_VERSIONS.length);
        for (short[] v : API_VERSIONS) out.putShort(v[0]).putShort(v[1]).putShort(v[2]);
        out.flip();
        server.socketServer.requestChannel.sendResponse(req, out);
    }
}

final class KafkaRequestHandler extends Thread {
    private final RequestChannel channel;
    private final KafkaApis apis;

    KafkaRequestHandler(int id, RequestChannel channel, KafkaApis apis) {
        super("kafka-request-handler-" + id);
        this.channel = channel;
        this.apis = apis;
        setDaemon(true);
    }

    @Override
    public void run() {
        while (true) {
            try {
                RequestChannel.Request req = channel.receiveRequest(300);
                if (req == null) continue;
                if (req == RequestChannel.ALL_DONE) return;
                apis.handle(req);
            } catch (InterruptedException e) {
                return;
            } catch (Throwable t) {
                Logger.error("kafka.server.KafkaApis", "Error when handling request", t.toString());
            }
        }
    }
}

public final class KafkaServer {
    private static final String LOG = "kafka.server.KafkaServer";
    final KafkaConfig config;
    ZkUtils zkUtils;
    SocketServer socketServer;
    ReplicaManager replicaManager;
    GroupCoordinator groupCoordinator;
    GroupMetadataManager groupManager;
    KafkaController controller;
    KafkaScheduler scheduler;
    private final List<KafkaRequestHandler> handlers = new ArrayList<>();
    private final AtomicBoolean shutdownStarted = new AtomicBoolean();
    private final java.util.concurrent.CountDownLatch shutdownLatch = new java.util.concurrent.CountDownLatch(1);

    public KafkaServer(Properties props) { config = new KafkaConfig(props); }

    private String prefix() { return "[Kafka Server " + config.brokerId + "], "; }

    public void startup() throws Exception {
        Logger.init(config.logDir);
        Logger.info(LOG, prefix() + "starting");
        Logger.info(LOG, "Connecting to zookeeper on " + config.zkConnect);
        zkUtils = new ZkUtils(config.zkConnect, config.zkSessionTimeoutMs);
        scheduler = new KafkaScheduler(10);
        groupManager = new GroupMetadataManager(config.brokerId, config.offsetsRetentionCheckIntervalMs);
        groupCoordinator = new GroupCoordinator(config.brokerId, groupManager); // starts executor-Heartbeat
        socketServer = new SocketServer(config.brokerId, config.host, config.port, config.numNetworkThreads, config.queuedMaxRequests);
        socketServer.startup();
        replicaManager = new ReplicaManager(config.brokerId, config, zkUtils);
        groupManager.startup(replicaManager, groupCoordinator);
        replicaManager.startup(groupManager, scheduler);
        controller = new KafkaController(config.brokerId, zkUtils, config.uncleanLeaderElection);
        controller.startup();
        groupCoordinator.startup();
        KafkaApis apis = new KafkaApis(this);
        for (int i = 0; i < config.numIoThreads; i++) {
            KafkaRequestHandler h = new KafkaRequestHandler(i, socketServer.requestChannel, apis);
            handlers.add(h);
            h.start();
        }
        registerBrokerInZk();
        zkUtils.onNewSession = () -> {
            Logger.info(LOG, "re-registering broker info in ZK for broker " + config.brokerId);
            try { registerBrokerInZk(); } catch (Exception e) { Logger.error(LOG, "Error re-registering broker " + e); }
            controller.onNewSession();
            replicaManager.refreshBrokers();
            replicaManager.refreshTopics();
        };
        Logger.info("org.apache.kafka.common.utils.AppInfoParser", "Kafka version : 0.10.1.0");
        Logger.info(LOG, prefix() + "started");
        if (!config.readyFile.isEmpty()) {
            try (FileWriter w = new FileWriter(new File(config.readyFile))) {
                w.write(ProcessHandle.current().pid() + "\n");
            }
        }
    }

    private void registerBrokerInZk() throws Exception {
        String path = "/brokers/ids/" + config.brokerId;
        String json = "{\"jmx_port\":-1,\"timestamp\":\"" + System.currentTimeMillis() + "\",\"endpoints\":[\"PLAINTEXT://" + config.host + ":"
                + config.port + "\"],\"host\":\"" + config.host + "\",\"version\":3,\"port\":" + config.port + "}";
        try {
            zkUtils.createEphemeral(path, json);
        } catch (KeeperException.NodeExistsException e) {
            throw new RuntimeException("A broker is already registered on the path " + path + ". This probably indicates that you either have configured a brokerid that is already in use, or else you have shutdown this broker and restarted it faster than the zookeeper timeout so it appears to be re-registering.");
        }
        Logger.info("kafka.utils.ZKCheckedEphemeral", "Result of znode creation is: OK");
        Logger.info("kafka.utils.ZkUtils", "Registered broker " + config.brokerId + " at path " + path + " with addresses: PLAINTEXT -> EndPoint(" + config.host + "," + config.port + ",PLAINTEXT)");
    }

    /** Lab fault injection: incident 001's monitor deadlock (see LabFaultInjector). */
    public void injectDeadlock() {
        String key = null;
        for (Partition p : replicaManager.allPartitions())
            if (p.topic.equals("__consumer_offsets") && p.isLocalLeader() && (key == null || p.partitionId < Integer.parseInt(key.substring(key.lastIndexOf('-') + 1))))
                key = p.topic + "-" + p.partitionId;
        if (key == null) key = "__consumer_offsets-0";
        GroupMetadata group = groupCoordinator.group("lab-consumers");
        LabFaultInjector.purgatoryKey = key;
        groupManager.prepareStoreOffsets(group, key);
        LabFaultInjector.deadlockArmed = true;
    }

    public void shutdown() {
        if (!shutdownStarted.compareAndSet(false, true)) return;
        try {
            Logger.info(LOG, prefix() + "shutting down");
            if (socketServer != null) socketServer.shutdown();
            Logger.info("kafka.server.KafkaRequestHandlerPool", "[Kafka Request Handler on Broker " + config.brokerId + "], shutting down");
            // Like Kafka: hand every handler a shutdown request and join it. A deadlocked handler never returns.
            for (int i = 0; i < handlers.size(); i++) socketServer.requestChannel.sendRequest(RequestChannel.ALL_DONE);
            for (KafkaRequestHandler h : handlers) h.join();
            Logger.info("kafka.server.KafkaRequestHandlerPool", "[Kafka Request Handler on Broker " + config.brokerId + "], shut down completely");
            if (scheduler != null) scheduler.shutdown();
            if (replicaManager != null) replicaManager.shutdown();
            if (groupCoordinator != null) groupCoordinator.shutdown();
            if (groupManager != null) groupManager.shutdown();
            if (controller != null) controller.shutdown();
            if (zkUtils != null) zkUtils.close();
            Logger.info(LOG, prefix() + "shut down completed");
        } catch (Throwable t) {
            Logger.fatal(LOG, prefix() + "Fatal error during KafkaServer shutdown.", t.toString());
        } finally {
            shutdownLatch.countDown();
        }
    }

    public void awaitShutdown() throws InterruptedException { shutdownLatch.await(); }
}
