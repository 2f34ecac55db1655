public class GcCycle {
    public static void main(String[] a) throws Exception {
        java.util.List<byte[]> keep = new java.util.ArrayList<>();
        for (int i = 0; i < 400; i++) { keep.add(new byte[256 * 1024]); if (keep.size() > 120) keep.remove(0); }
        System.gc();  // -XX:+ExplicitGCInvokesConcurrent: a concurrent cycle (Pause Young (Concurrent Start), Remark, Cleanup)
        Thread.sleep(1500);
        for (int i = 0; i < 400; i++) { keep.add(new byte[256 * 1024]); if (keep.size() > 120) keep.remove(0); }
        System.out.println("done " + keep.size());
    }
}
