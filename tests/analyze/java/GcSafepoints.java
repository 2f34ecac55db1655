// Records a JDK 17+ GC log with safepoint lines (tests/analyze/fixtures/jdk17_safepoints.gc.log): humongous
// allocations in a small heap give G1 young pauses and concurrent cycles, then two System.gc() full pauses; each
// pause is followed by the "Safepoint ..., Total: N ns" line of the same stop.
public class GcSafepoints {
    public static void main(String[] args) throws Exception {
        byte[][] keep = new byte[16][];
        for (int i = 0; i < 200; i++) {
            keep[i % 16] = new byte[1 << 20];
        }
        System.gc();
        Thread.sleep(100);
        System.gc();
    }
}
