import java.lang.reflect.Method;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.locks.LockSupport;

/**
 * Fixture recorder for JDK 21+ thread dumps (compiled with javac 17: the virtual-thread API is called by
 * reflection). A platform thread holds a monitor; a named virtual thread blocks on it inside synchronized code, so
 * it stays mounted (pinned) and its carrier prints "Carrying virtual thread #N"; unnamed virtual threads of an
 * ExecutorService park (unmounted: they appear only in Thread.dump_to_file). Prints READY when all are in place.
 */
public class VirtualThreads {
    static final Object offsetsLock = new Object();

    public static void main(String[] args) throws Exception {
        CountDownLatch holding = new CountDownLatch(1);
        Thread holder = new Thread(() -> {
            synchronized (offsetsLock) {
                holding.countDown();
                LockSupport.park();
            }
        }, "offsets-lock-holder");
        holder.setDaemon(true);
        holder.start();
        holding.await();

        Object builder = Thread.class.getMethod("ofVirtual").invoke(null);
        Class<?> ofVirtual = Class.forName("java.lang.Thread$Builder$OfVirtual");
        builder = ofVirtual.getMethod("name", String.class).invoke(builder, "vt-pinned-on-monitor");
        Method start = ofVirtual.getMethod("start", Runnable.class);
        start.invoke(builder, (Runnable) () -> {
            synchronized (offsetsLock) { System.out.println("unreachable"); }
        });

        ExecutorService pool = (ExecutorService) Executors.class.getMethod("newVirtualThreadPerTaskExecutor").invoke(null);
        CountDownLatch parked = new CountDownLatch(3);
        for (int i = 0; i < 3; i++) {
            pool.submit(() -> {
                parked.countDown();
                LockSupport.park();  // unmounted: frees its carrier
            });
        }
        parked.await();
        Thread.sleep(500);
        System.out.println("READY");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
