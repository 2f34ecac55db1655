import java.util.concurrent.CountDownLatch;
import java.util.concurrent.locks.ReentrantLock;

/** Test fixture: a real monitor deadlock named like seed 001 plus a ReentrantLock cycle. */
public class KafkaDeadlock {
    static final class GroupMetadata {}
    static final class DelayedProduce {}
    static final class Watchers {}

    static void monitorCycle(String name, Object first, Object second, CountDownLatch ready) {
        Thread t = new Thread(() -> {
            synchronized (first) {
                ready.countDown();
                try { ready.await(); } catch (InterruptedException e) { return; }
                synchronized (second) { System.out.println("unreachable " + name); }
            }
        }, name);
        t.setDaemon(true);
        t.start();
    }

    static void lockCycle(String name, ReentrantLock first, ReentrantLock second, CountDownLatch ready) {
        Thread t = new Thread(() -> {
            first.lock();
            try {
                ready.countDown();
                try { ready.await(); } catch (InterruptedException e) { return; }
                second.lock();
                second.unlock();
            } finally { first.unlock(); }
        }, name);
        t.setDaemon(true);
        t.start();
    }

    public static void main(String[] args) throws Exception {
        Object group = new GroupMetadata();
        Object watchers = new Watchers();
        Object produce = new DelayedProduce();
        CountDownLatch m = new CountDownLatch(3);
        monitorCycle("executor-Heartbeat", produce, group, m);
        monitorCycle("group-metadata-manager-0", group, watchers, m);
        monitorCycle("kafka-request-handler-3", watchers, produce, m);
        ReentrantLock a = new ReentrantLock();
        ReentrantLock b = new ReentrantLock();
        CountDownLatch l = new CountDownLatch(2);
        lockCycle("replica-fetcher-lock-A", a, b, l);
        lockCycle("log-cleaner-lock-B", b, a, l);
        m.await();
        l.await();
        Thread.sleep(300);
        System.out.println("READY");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
