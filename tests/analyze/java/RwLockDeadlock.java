import java.util.concurrent.CountDownLatch;
import java.util.concurrent.locks.ReentrantLock;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * Fixture recorder: a lock cycle made of ownable synchronizers only (a ReentrantReadWriteLock's write lock and a
 * ReentrantLock), plus a third cycle member holding a monitor, so jstack's deadlock report names every kind of
 * holder the JDK prints ("waiting for ownable synchronizer ... ReentrantReadWriteLock$NonfairSync",
 * "... ReentrantLock$NonfairSync", "waiting to lock monitor"). Prints READY when the threads are in place.
 */
public class RwLockDeadlock {
    static final ReentrantReadWriteLock partitionLock = new ReentrantReadWriteLock();
    static final ReentrantLock groupLock = new ReentrantLock();
    static final Object replicaStateLock = new Object();

    public static void main(String[] args) throws Exception {
        CountDownLatch held = new CountDownLatch(3);
        Thread a = new Thread(() -> {
            partitionLock.writeLock().lock();
            held.countDown();
            await(held);
            groupLock.lock();  // held by group-metadata-manager-0
        }, "kafka-request-handler-1");
        Thread b = new Thread(() -> {
            groupLock.lock();
            held.countDown();
            await(held);
            synchronized (replicaStateLock) { System.out.println("unreachable"); }  // held by controller-event-thread
        }, "group-metadata-manager-0");
        Thread c = new Thread(() -> {
            synchronized (replicaStateLock) {
                held.countDown();
                await(held);
                partitionLock.readLock().lock();  // the write lock is held by kafka-request-handler-1
            }
        }, "controller-event-thread");
        for (Thread t : new Thread[] {a, b, c}) { t.setDaemon(true); t.start(); }
        held.await();
        Thread.sleep(500);
        System.out.println("READY");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }

    static void await(CountDownLatch l) {
        try { l.await(); } catch (InterruptedException e) { throw new RuntimeException(e); }
    }
}
