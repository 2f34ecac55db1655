import java.lang.instrument.Instrumentation;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Enumeration;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The kafka-runbooks lab's fault agent, loaded into every lab broker with -javaagent (Kafka's code is not changed).
 *
 * Idle until commanded: it polls RUN_DIR/fault-command ("SEQ ACTION"), runs each new command once and writes
 * RUN_DIR/fault-state.json ({"seq", "ok", "message", "active", "needs_restart"}). Every thread it creates is named
 * "lab-fault-*". Actions:
 *   hold-requests / release-requests  a lab-fault-hold-requests thread owns the lock of Kafka's request queue
 *                                     (RequestChannel's ArrayBlockingQueue): network processors block in put(),
 *                                     request handlers in poll(): the broker stops serving, ZooKeeper sees nothing.
 *   block-logs / unblock-logs         a lab-fault-block-logs thread owns the monitor of every log4j appender
 *                                     (AppenderSkeleton.doAppend is synchronized): every thread that logs blocks,
 *                                     as behind a hung disk write.
 *   deadlock                          lab-fault-deadlock-a takes the request queue's lock, then wants a monitor that
 *                                     lab-fault-deadlock-b holds while b wants the request queue's lock: a real
 *                                     Java-level deadlock that Kafka's handlers and processors queue behind.
 *                                     Only a restart undoes it.
 *   kill-cleaner                      Thread.stop() on kafka-log-cleaner-thread-*: the cleaner thread dies with
 *                                     ThreadDeath, as a thread dies on an uncaught error. Only a restart undoes it.
 *   hold-fetchers / release-fetchers  a lab-fault-hold-fetchers thread owns the partitionMapLock of every
 *                                     ReplicaFetcherThread of this broker: it stays registered and answers clients,
 *                                     but its followers stop fetching and fall out of the ISRs of partitions that
 *                                     get writes (a returning broker that cannot catch up).
 *   hold-controller-requests:N        in the active controller: a lab-fault-hold-controller-requests thread owns the
 *     / release-controller-requests   monitor of the java.nio Selector of Controller-C-to-broker-N-send-thread, so
 *                                     the controller's LeaderAndIsr / UpdateMetadata requests to broker N wait in its
 *                                     queue while every other broker gets them: broker N's metadata cache goes
 *                                     stale (incident 003, where they waited in N's own request queue). While held,
 *                                     a controller that must drop broker N or resign waits for the release.
 *   fence-fetcher:TOPIC:P             in a follower: calls Kafka's own AbstractFetcherThread.onPartitionFenced on the
 *                                     ReplicaFetcherThread fetching TOPIC-P -- what Kafka 2.1+ does when the leader
 *                                     answers FENCED_LEADER_EPOCH: the partition leaves the fetcher ("Will await the
 *                                     new LeaderAndIsr state before resuming fetching") while the broker keeps its
 *                                     leader epoch, so a LeaderAndIsr of the same epoch is ignored and the follower
 *                                     never fetches TOPIC-P again (the stuck follower of issue 16). Only a restart, or
 *                                     a new leader epoch for TOPIC-P, undoes it. Before 2.1 (0.10.2: no
 *                                     onPartitionFenced, no FENCED_LEADER_EPOCH) it calls the fetcher's own
 *                                     removePartitions(Set(TOPIC-P)), what ReplicaFetcherManager does when a broker
 *                                     stops following a partition: the same state (no fetcher, the same leader epoch,
 *                                     a LeaderAndIsr of that epoch ignored), and no log line.
 *   ping                              reports the state (and whether Kafka's shutdown hook is running).
 */
public final class LabFaultAgent {
    private static final long POLL_MS = 200;
    private static final long STEP_TIMEOUT_MS = 10_000;

    /** The monitor the deadlock's second lock is (named so in jstack). */
    static final class LabFaultMonitor {
    }

    private final Path dir;
    private final Path commandFile;
    private final Path stateFile;
    private long seq;
    private boolean ok = true;
    private String message = "agent started";
    private final Set<String> active = new TreeSet<>();
    private String needsRestart;
    private Holder requests;
    private Holder logs;
    private Holder fetchers;
    private Holder controllerRequests;

    private LabFaultAgent(Path dir) {
        this.dir = dir;
        this.commandFile = dir.resolve("fault-command");
        this.stateFile = dir.resolve("fault-state.json");
    }

    public static void premain(String args, Instrumentation inst) {
        LabFaultAgent agent = new LabFaultAgent(Paths.get(args));
        Thread t = new Thread(agent::loop, "lab-fault-agent");
        t.setDaemon(true);
        t.start();
    }

    public static void agentmain(String args, Instrumentation inst) {
        premain(args, inst);
    }

    private void loop() {
        long baseline = readCommandSeq();  // a command file left from an earlier JVM is never replayed
        seq = Math.max(baseline, 0);
        writeState();
        while (true) {
            try {
                Thread.sleep(POLL_MS);
                String[] cmd = readCommand();
                if (cmd == null) {
                    continue;
                }
                long s = Long.parseLong(cmd[0]);
                if (s <= seq) {
                    continue;
                }
                seq = s;
                try {
                    message = execute(cmd[1]);
                    ok = true;
                } catch (Throwable e) {
                    ok = false;
                    message = e.toString();
                }
                writeState();
            } catch (InterruptedException e) {
                return;
            } catch (Throwable e) {
                ok = false;
                message = "agent loop: " + e;
                writeState();
            }
        }
    }

    private long readCommandSeq() {
        String[] cmd = readCommand();
        try {
            return cmd == null ? 0 : Long.parseLong(cmd[0]);
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    private String[] readCommand() {
        try {
            if (!Files.exists(commandFile)) {
                return null;
            }
            String text = new String(Files.readAllBytes(commandFile), StandardCharsets.UTF_8).trim();
            String[] parts = text.split("\\s+", 2);
            return parts.length == 2 ? parts : null;
        } catch (Exception e) {
            return null;
        }
    }

    private String execute(String action) throws Exception {
        switch (action) {
            case "ping":
                return "ok";
            case "hold-requests":
                if (requests != null) {
                    return "requests already held";
                }
                requests = Holder.start("lab-fault-hold-requests", Collections.singletonList(requestQueueLock()));
                active.add("requests-held");
                return "holding the lock of kafka.network.RequestChannel's request queue";
            case "release-requests":
                if (requests != null) {
                    requests.release();
                    requests = null;
                }
                active.remove("requests-held");
                return "request queue released";
            case "block-logs": {
                if (logs != null) {
                    return "logs already blocked";
                }
                List<Object> appenders = log4jAppenders();
                logs = Holder.start("lab-fault-block-logs", appenders);
                active.add("logs-blocked");
                return "holding the monitors of " + appenders.size() + " log4j appenders";
            }
            case "unblock-logs":
                if (logs != null) {
                    logs.release();
                    logs = null;
                }
                active.remove("logs-blocked");
                return "log4j appenders released";
            case "deadlock":
                return deadlock();
            case "kill-cleaner":
                return killCleaner();
            case "hold-fetchers": {
                if (fetchers != null) {
                    return "fetchers already held";
                }
                List<Object> locks = fetcherLocks();
                fetchers = Holder.start("lab-fault-hold-fetchers", locks);
                active.add("fetchers-held");
                return "holding the partitionMapLock of " + locks.size() + " ReplicaFetcherThread(s)";
            }
            case "release-fetchers":
                if (fetchers != null) {
                    fetchers.release();
                    fetchers = null;
                }
                active.remove("fetchers-held");
                return "fetchers released";
            case "release-controller-requests":
                if (controllerRequests != null) {
                    controllerRequests.release();
                    controllerRequests = null;
                }
                active.removeIf(a -> a.startsWith("controller-requests-held"));
                return "controller requests released";
            default:
                if (action.startsWith("fence-fetcher:")) {
                    String arg = action.substring("fence-fetcher:".length());
                    int colon = arg.lastIndexOf(':');
                    return fenceFetcher(arg.substring(0, colon), Integer.parseInt(arg.substring(colon + 1)));
                }
                if (action.startsWith("hold-controller-requests:")) {
                    int broker = Integer.parseInt(action.substring("hold-controller-requests:".length()));
                    if (controllerRequests != null) {
                        throw new IllegalStateException("controller requests already held: release them first");
                    }
                    Thread sender = controllerSendThread(broker);
                    Object selector = nioSelectorOf(sender);
                    controllerRequests = Holder.start("lab-fault-hold-controller-requests", Collections.singletonList(selector));
                    active.add("controller-requests-held:" + broker);
                    return "holding the selector of " + sender.getName() + ": the controller's requests to broker " + broker + " wait";
                }
                throw new IllegalArgumentException("unknown action " + action);
        }
    }

    // ------------------------------------------------------------------ faults

    private String deadlock() throws Exception {
        if (requests != null) {
            throw new IllegalStateException("release-requests first: the request queue's lock is held by lab-fault-hold-requests");
        }
        ReentrantLock queueLock = requestQueueLock();
        Object monitor = new LabFaultMonitor();
        CountDownLatch aHolds = new CountDownLatch(1);
        CountDownLatch bHolds = new CountDownLatch(1);
        Thread a = new Thread(() -> {
            queueLock.lock();
            try {
                aHolds.countDown();
                awaitUninterruptibly(bHolds);
                synchronized (monitor) {
                    throw new IllegalStateException("unreachable: the deadlock was broken");
                }
            } finally {
                queueLock.unlock();
            }
        }, "lab-fault-deadlock-a");
        Thread b = new Thread(() -> {
            synchronized (monitor) {
                bHolds.countDown();
                awaitUninterruptibly(aHolds);
                queueLock.lock();
                queueLock.unlock();
            }
        }, "lab-fault-deadlock-b");
        a.setDaemon(true);
        b.setDaemon(true);
        a.start();
        b.start();
        long deadline = System.currentTimeMillis() + STEP_TIMEOUT_MS;
        while (!(a.getState() == Thread.State.BLOCKED && b.getState() == Thread.State.WAITING)) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("deadlock did not form: a=" + a.getState() + " b=" + b.getState());
            }
            Thread.sleep(10);
        }
        active.add("deadlock");
        needsRestart = "deadlock";
        return "lab-fault-deadlock-a holds the request queue's lock and waits for a LabFaultMonitor held by lab-fault-deadlock-b, "
            + "which waits for the request queue's lock";
    }

    @SuppressWarnings({"deprecation", "removal"})
    private String killCleaner() throws Exception {
        List<Thread> cleaners = new ArrayList<>();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith("kafka-log-cleaner-thread-")) {
                cleaners.add(t);
            }
        }
        if (cleaners.isEmpty()) {
            throw new IllegalStateException("no kafka-log-cleaner-thread-* in this JVM (log.cleaner.enable=false, or already dead)");
        }
        List<String> names = new ArrayList<>();
        for (Thread t : cleaners) {
            t.stop();
            t.join(STEP_TIMEOUT_MS);
            if (t.isAlive()) {
                throw new IllegalStateException(t.getName() + " still alive after Thread.stop()");
            }
            names.add(t.getName());
        }
        active.add("cleaner-killed");
        needsRestart = needsRestart == null ? "cleaner-killed" : needsRestart;
        return "stopped " + names + " with Thread.stop() (ThreadDeath)";
    }

    /** Kafka's own handling of FENCED_LEADER_EPOCH for one partition (AbstractFetcherThread.onPartitionFenced, 2.1+);
     *  before 2.1 the fetcher's own removePartitions (0.10.2 has no leader-epoch fencing). */
    private String fenceFetcher(String topic, int partition) throws Exception {
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (!t.getName().startsWith("ReplicaFetcherThread-") || !t.isAlive()) {
                continue;
            }
            ClassLoader cl = t.getClass().getClassLoader();
            Class<?> tpClass = Class.forName("org.apache.kafka.common.TopicPartition", true, cl);
            Object tp = tpClass.getConstructor(String.class, int.class).newInstance(topic, partition);
            Class<?> fetcher = Class.forName("kafka.server.AbstractFetcherThread", true, cl);
            Method fenced = null;
            try {
                fenced = fetcher.getDeclaredMethod("onPartitionFenced", tpClass);
            } catch (NoSuchMethodException e) {
                // before 2.1: removePartitions below
            }
            // Scala 2.11 names a private val used in closures kafka$server$AbstractFetcherThread$$partitionStates
            Object states;
            try {
                states = field(t, t.getClass(), "partitionStates");
            } catch (NoSuchFieldException e) {
                states = field(t, t.getClass(), "kafka$server$AbstractFetcherThread$$partitionStates");
            }
            if (!(Boolean) states.getClass().getMethod("contains", tpClass).invoke(states, tp)) {
                continue;
            }
            String how;
            if (fenced != null) {
                fenced.setAccessible(true);
                fenced.invoke(t, tp);
                how = ".onPartitionFenced(";
            } else {
                Class<?> set1 = Class.forName("scala.collection.immutable.Set$Set1", true, cl);
                java.lang.reflect.Constructor<?> one = set1.getDeclaredConstructor(Object.class);
                one.setAccessible(true);
                Method remove = fetcher.getMethod("removePartitions", Class.forName("scala.collection.Set", true, cl));
                remove.invoke(t, one.newInstance(tp));
                how = ".removePartitions(";
            }
            active.add("fetcher-fenced:" + topic + "-" + partition);
            needsRestart = needsRestart == null ? "fetcher-fenced" : needsRestart;
            return t.getName() + how + topic + "-" + partition + "): the partition left the fetcher; "
                + "this broker keeps its leader epoch and waits for a higher one";
        }
        throw new IllegalStateException("no ReplicaFetcherThread of this broker fetches " + topic + "-" + partition
            + " (not a follower of it, or already fenced)");
    }

    // ------------------------------------------------------------------ Kafka and log4j objects, by reflection

    private static ReentrantLock requestQueueLock() throws Exception {
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            // 2.3: data-plane-kafka-request-handler-N; 0.10.2.1: kafka-request-handler-N. Both: Thread.target is a
            // kafka.server.KafkaRequestHandler whose requestChannel holds the ArrayBlockingQueue as
            // kafka$network$RequestChannel$$requestQueue (scalac's expanded name: a Gauge reads it)
            if (!t.getName().contains("kafka-request-handler-")) {
                continue;
            }
            Object handler = field(t, Thread.class, "target");  // kafka.server.KafkaRequestHandler
            Object channel = field(handler, handler.getClass(), "requestChannel");
            Object queue = field(channel, channel.getClass(), "kafka$network$RequestChannel$$requestQueue");
            return (ReentrantLock) field(queue, java.util.concurrent.ArrayBlockingQueue.class, "lock");
        }
        throw new IllegalStateException("no *kafka-request-handler-* thread: the broker has not started its request handlers");
    }

    private static List<Object> fetcherLocks() throws Exception {
        List<Object> locks = new ArrayList<>();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith("ReplicaFetcherThread-")) {  // kafka.server.ReplicaFetcherThread itself
                locks.add(field(t, t.getClass(), "partitionMapLock"));
            }
        }
        if (locks.isEmpty()) {
            throw new IllegalStateException("no ReplicaFetcherThread-* in this JVM (it follows no partition)");
        }
        return locks;
    }

    /** Controller-C-to-broker-N-send-thread: only in the active controller. */
    private static Thread controllerSendThread(int broker) {
        String suffix = "-to-broker-" + broker + "-send-thread";
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith("Controller-") && t.getName().endsWith(suffix) && t.isAlive()) {
                return t;
            }
        }
        throw new IllegalStateException("no Controller-*" + suffix + " in this JVM: it is not the active controller, or broker "
            + broker + " is not registered");
    }

    private static Object nioSelectorOf(Thread sender) throws Exception {
        Object client = field(sender, sender.getClass(), "networkClient");  // kafka.controller.RequestSendThread
        Object selector = field(client, client.getClass(), "selector");  // org.apache.kafka.common.network.Selector
        return field(selector, selector.getClass(), "nioSelector");  // java.nio.channels.Selector: select() holds its monitor
    }

    private static List<Object> log4jAppenders() throws Exception {
        ClassLoader cl = ClassLoader.getSystemClassLoader();
        Class<?> logManager = Class.forName("org.apache.log4j.LogManager", true, cl);
        Class<?> category = Class.forName("org.apache.log4j.Category", true, cl);
        Map<Object, Boolean> seen = new IdentityHashMap<>();
        List<Object> loggers = new ArrayList<>();
        loggers.add(logManager.getMethod("getRootLogger").invoke(null));
        Enumeration<?> current = (Enumeration<?>) logManager.getMethod("getCurrentLoggers").invoke(null);
        while (current.hasMoreElements()) {
            loggers.add(current.nextElement());
        }
        List<Object> appenders = new ArrayList<>();
        for (Object logger : loggers) {
            Enumeration<?> e = (Enumeration<?>) category.getMethod("getAllAppenders").invoke(logger);
            while (e.hasMoreElements()) {
                Object a = e.nextElement();
                if (seen.put(a, Boolean.TRUE) == null) {
                    appenders.add(a);
                }
            }
        }
        if (appenders.isEmpty()) {
            throw new IllegalStateException("no log4j appenders found");
        }
        return appenders;
    }

    private static Object field(Object target, Class<?> start, String name) throws Exception {
        for (Class<?> c = start; c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(target);
            } catch (NoSuchFieldException e) {
                // try the superclass
            }
        }
        throw new NoSuchFieldException(start.getName() + "." + name);
    }

    static void awaitUninterruptibly(CountDownLatch latch) {
        while (true) {
            try {
                latch.await();
                return;
            } catch (InterruptedException e) {
                // a fault holder only lets go when released
            }
        }
    }

    // ------------------------------------------------------------------ state file

    private void writeState() {
        StringBuilder sb = new StringBuilder();
        sb.append("{\"pid\": ").append(ProcessHandle.current().pid());
        sb.append(", \"seq\": ").append(seq);
        sb.append(", \"ok\": ").append(ok);
        sb.append(", \"message\": ").append(json(message));
        sb.append(", \"active\": [");
        int i = 0;
        for (String a : active) {
            sb.append(i++ == 0 ? "" : ", ").append(json(a));
        }
        sb.append("], \"needs_restart\": ").append(needsRestart == null ? "null" : json(needsRestart));
        sb.append(", \"shutting_down\": ").append(shutdownHookRunning());
        sb.append(", \"at_ms\": ").append(System.currentTimeMillis()).append("}\n");
        try {
            Path tmp = dir.resolve(stateFile.getFileName() + ".tmp");
            Files.write(tmp, sb.toString().getBytes(StandardCharsets.UTF_8));
            Files.move(tmp, stateFile, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (Exception e) {
            // nothing to report to: the lab sees a stale state file and times out naming it
        }
    }

    /**
     * Kafka's shutdown hook thread exists once the JVM got SIGTERM (a shutdown in progress, maybe stuck). 2.x names it
     * "kafka-shutdown-hook"; 0.10's is an unnamed anonymous subclass of Thread in kafka.Kafka ("Thread-N",
     * class kafka.Kafka$$anon$1).
     */
    private static boolean shutdownHookRunning() {
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.isAlive() && (t.getName().equals("kafka-shutdown-hook") || t.getClass().getName().startsWith("kafka.Kafka$"))) {
                return true;
            }
        }
        return false;
    }

    private static String json(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        return sb.append('"').toString();
    }

    /** A lab-fault thread that takes a list of locks (ReentrantLocks or monitors), in order, and holds them until released. */
    static final class Holder {
        private final Thread thread;
        private final CountDownLatch release = new CountDownLatch(1);
        private final CountDownLatch held = new CountDownLatch(1);

        private Holder(String name, List<Object> locks) {
            this.thread = new Thread(() -> hold(locks, 0), name);
            this.thread.setDaemon(true);
        }

        static Holder start(String name, List<Object> locks) throws InterruptedException {
            Holder h = new Holder(name, locks);
            h.thread.start();
            if (!h.held.await(STEP_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
                h.release.countDown();
                throw new IllegalStateException(name + " could not take its locks within " + STEP_TIMEOUT_MS + " ms");
            }
            return h;
        }

        private void hold(List<Object> locks, int i) {
            if (i == locks.size()) {
                held.countDown();
                awaitUninterruptibly(release);
                return;
            }
            Object lock = locks.get(i);
            if (lock instanceof ReentrantLock) {
                ReentrantLock l = (ReentrantLock) lock;
                l.lock();
                try {
                    hold(locks, i + 1);
                } finally {
                    l.unlock();
                }
            } else {
                synchronized (lock) {
                    hold(locks, i + 1);
                }
            }
        }

        void release() throws InterruptedException {
            release.countDown();
            thread.join(STEP_TIMEOUT_MS);
            if (thread.isAlive()) {
                throw new IllegalStateException(thread.getName() + " did not let go within " + STEP_TIMEOUT_MS + " ms");
            }
        }
    }
}
