package kafka.utils;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;

/**
 * Thin wrapper over the real ZooKeeper client. Like Kafka 0.10's I0Itec ZkClient, watch callbacks are
 * handed to a dedicated "ZkClient-EventThread-<id>-<connect>" thread.
 */
public final class ZkUtils {
    public final String connect;
    private final int sessionTimeoutMs;
    private volatile ZooKeeper zk;
    private final BlockingQueue<Runnable> events = new LinkedBlockingQueue<>();
    private final Thread eventThread;
    public volatile Runnable onNewSession;

    public ZkUtils(String connect, int sessionTimeoutMs) throws Exception {
        this.connect = connect;
        this.sessionTimeoutMs = sessionTimeoutMs;
        eventThread = new Thread(this::runEvents, "ZkClient-EventThread-" + (12 + (int) (System.nanoTime() % 10)) + "-" + connect);
        eventThread.setDaemon(true);
        eventThread.start();
        connectSession();
    }

    private void connectSession() throws Exception {
        CountDownLatch connected = new CountDownLatch(1);
        zk = new ZooKeeper(connect, sessionTimeoutMs, (WatchedEvent e) -> {
            if (e.getType() != Watcher.Event.EventType.None) return;
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) connected.countDown();
            if (e.getState() == Watcher.Event.KeeperState.Expired) {
                Logger.info("org.I0Itec.zkclient.ZkClient", "zookeeper state changed (Expired)");
                events.add(() -> {
                    try {
                        connectSession();
                        Runnable r = onNewSession;
                        if (r != null) r.run();
                    } catch (Exception ex) {
                        Logger.error("kafka.utils.ZkUtils", "Error re-establishing zookeeper session: " + ex);
                    }
                });
            }
        });
        if (!connected.await(30, TimeUnit.SECONDS)) throw new IllegalStateException("Unable to connect to zookeeper server within timeout: 30000");
        Logger.info("org.I0Itec.zkclient.ZkClient", "zookeeper state changed (SyncConnected)");
    }

    private void runEvents() {
        while (true) {
            try {
                events.take().run();
            } catch (InterruptedException ie) {
                return;
            } catch (Throwable t) {
                Logger.error("org.I0Itec.zkclient.ZkEventThread", "Error handling event " + t);
            }
        }
    }

    /** Watcher that runs the action on the ZkClient event thread for data/children events. */
    public Watcher watcher(Runnable action) {
        return e -> {
            if (e.getType() != Watcher.Event.EventType.None) events.add(action);
        };
    }

    public void enqueue(Runnable r) { events.add(r); }

    public ZooKeeper zk() { return zk; }

    public String readData(String path, Stat stat, Watcher w) throws KeeperException, InterruptedException {
        return new String(zk.getData(path, w, stat), StandardCharsets.UTF_8);
    }

    public String readDataMaybeNull(String path, Stat stat, Watcher w) throws InterruptedException {
        try {
            return readData(path, stat, w);
        } catch (KeeperException.NoNodeException e) {
            if (w != null) {
                try { zk.exists(path, w); } catch (KeeperException ignored) { }
            }
            return null;
        } catch (KeeperException e) {
            return null;
        }
    }

    public List<String> children(String path, Watcher w) throws InterruptedException {
        try {
            return zk.getChildren(path, w);
        } catch (KeeperException e) {
            return new ArrayList<>();
        }
    }

    /** Conditional update; returns the new zkVersion, or -1 on version conflict (Kafka's conditionalUpdatePersistentPath). */
    public int conditionalUpdate(String path, String data, int expectVersion) throws InterruptedException {
        try {
            Stat s = zk.setData(path, data.getBytes(StandardCharsets.UTF_8), expectVersion);
            return s.getVersion();
        } catch (KeeperException e) {
            return -1;
        }
    }

    public void createEphemeral(String path, String data) throws KeeperException, InterruptedException {
        zk.create(path, data.getBytes(StandardCharsets.UTF_8), ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
    }

    public void createPersistentSequential(String path, String data) throws KeeperException, InterruptedException {
        zk.create(path, data.getBytes(StandardCharsets.UTF_8), ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL);
    }

    public void createPersistent(String path, String data) throws KeeperException, InterruptedException {
        zk.create(path, data.getBytes(StandardCharsets.UTF_8), ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
    }

    public void ensurePersistent(String path) throws KeeperException, InterruptedException {
        StringBuilder cur = new StringBuilder();
        for (String part : path.split("/")) {
            if (part.isEmpty()) continue;
            cur.append('/').append(part);
            try {
                zk.create(cur.toString(), new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            } catch (KeeperException.NodeExistsException ignored) {
            }
        }
    }

    public void close() {
        try { zk.close(); } catch (InterruptedException ignored) { }
    }

    // ---- tiny JSON readers for Kafka's own znode formats ----
    public static int intField(String json, String name, int dflt) {
        Matcher m = Pattern.compile("\"" + Pattern.quote(name) + "\"\\s*:\\s*\"?(-?\\d+)").matcher(json);
        return m.find() ? Integer.parseInt(m.group(1)) : dflt;
    }

    public static String strField(String json, String name) {
        Matcher m = Pattern.compile("\"" + Pattern.quote(name) + "\"\\s*:\\s*\"([^\"]*)\"").matcher(json);
        return m.find() ? m.group(1) : null;
    }

    public static List<Integer> intList(String json, String name) {
        Matcher m = Pattern.compile("\"" + Pattern.quote(name) + "\"\\s*:\\s*\\[([^\\]]*)\\]").matcher(json);
        return m.find() ? parseInts(m.group(1)) : new ArrayList<>();
    }

    public static List<Integer> parseInts(String csv) {
        List<Integer> out = new ArrayList<>();
        for (String s : csv.split(",")) {
            s = s.trim();
            if (!s.isEmpty()) out.add(Integer.parseInt(s));
        }
        return out;
    }

    public static String csv(List<Integer> l) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < l.size(); i++) { if (i > 0) sb.append(','); sb.append(l.get(i)); }
        return sb.toString();
    }
}
