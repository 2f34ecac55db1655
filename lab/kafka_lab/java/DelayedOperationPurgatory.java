package kafka.server;

import java.util.Iterator;
import java.util.LinkedList;
import java.util.concurrent.ConcurrentHashMap;

/** Kafka 0.10.1's purgatory: per-key Watchers whose operation list is a java.util.LinkedList used as a monitor. */
public final class DelayedOperationPurgatory {
    public final String purgatoryName;
    private final ConcurrentHashMap<String, Watchers> watchersForKey = new ConcurrentHashMap<>();

    public DelayedOperationPurgatory(String purgatoryName) { this.purgatoryName = purgatoryName; }

    public abstract static class DelayedOperation {
        private volatile boolean completed;
        public boolean isCompleted() { return completed; }
        public boolean forceComplete() {
            if (completed) return false;
            completed = true;
            onComplete();
            return true;
        }
        public abstract boolean tryComplete();
        public abstract void onComplete();
    }

    public void watch(String key, DelayedOperation op) {
        Watchers w = watchersForKey.computeIfAbsent(key, k -> new Watchers());
        synchronized (w.operations) { w.operations.add(op); }
    }

    public int checkAndComplete(String key) {
        Watchers w = watchersForKey.get(key);
        return w == null ? 0 : w.tryCompleteWatched();
    }

    public static final class Watchers {
        final LinkedList<DelayedOperation> operations = new LinkedList<>();

        int tryCompleteWatched() {
            int completed = 0;
            synchronized (operations) {
                Iterator<DelayedOperation> it = operations.iterator();
                while (it.hasNext()) {
                    DelayedOperation op = it.next();
                    if (op.isCompleted()) { it.remove(); continue; }
                    synchronized (op) {
                        if (op.tryComplete()) { completed++; it.remove(); }
                    }
                }
            }
            return completed;
        }
    }
}
