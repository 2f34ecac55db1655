import java.util.concurrent.CountDownLatch;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Test fixture: a real JVM with a lock cycle made of a monitor AND a ReentrantLock (two threads named
 * lab-fault-*), four request-handler threads blocked behind it, and two distinct threads sharing one name.
 * Prints READY when every thread is in place.
 */
public class LabStall {
    static final Object requestLock = new Object();      // the lock the request path needs
    static final ReentrantLock logLock = new ReentrantLock();

    public static void main(String[] args) throws Exception {
        CountDownLatch held = new CountDownLatch(2);
        Thread a = new Thread(() -> {
            synchronized (requestLock) {
                held.countDown();
                try { held.await(); } catch (InterruptedException e) { return; }
                logLock.lock();  // held by lab-fault-2: never returns
            }
        }, "lab-fault-1");
        Thread b = new Thread(() -> {
            logLock.lock();
            held.countDown();
            try { held.await(); } catch (InterruptedException e) { return; }
            synchronized (requestLock) { System.out.println("unreachable"); }
        }, "lab-fault-2");
        for (Thread t : new Thread[] {a, b}) { t.setDaemon(true); t.start(); }
        held.await();
        Thread.sleep(200);
        for (int i = 0; i < 4; i++) {
            Thread h = new Thread(new kafka.server.KafkaRequestHandler(requestLock), "data-plane-kafka-request-handler-" + i);
            h.setDaemon(true);
            h.start();
        }
        for (int i = 0; i < 2; i++) {  // two threads, one name: told apart by nid
            Thread d = new Thread(() -> { logLock.lock(); }, "log-flusher");
            d.setDaemon(true);
            d.start();
        }
        Thread.sleep(300);
        System.out.println("READY");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
