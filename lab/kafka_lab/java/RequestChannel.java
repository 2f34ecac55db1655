package kafka.network;

import java.nio.ByteBuffer;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.TimeUnit;

/** Bounded request queue (queued.max.requests) shared by network threads and request handlers. */
public final class RequestChannel {
    public static final class Request {
        public final int processor;
        public final String connectionId;
        public final short apiKey;
        public final short apiVersion;
        public final int correlationId;
        public final String clientId;
        public final ByteBuffer body;
        final Object channelKey;

        Request(int processor, String connectionId, short apiKey, short apiVersion, int correlationId, String clientId, ByteBuffer body, Object channelKey) {
            this.processor = processor;
            this.connectionId = connectionId;
            this.apiKey = apiKey;
            this.apiVersion = apiVersion;
            this.correlationId = correlationId;
            this.clientId = clientId;
            this.body = body;
            this.channelKey = channelKey;
        }
    }

    public static final Request ALL_DONE = new Request(-1, "", (short) -1, (short) 0, 0, "", null, null);

    private final ArrayBlockingQueue<Request> requestQueue;
    private Processor[] processors;

    public RequestChannel(int queueSize) { requestQueue = new ArrayBlockingQueue<>(queueSize); }

    void setProcessors(Processor[] processors) { this.processors = processors; }

    /** Blocks when the queue is full: the network thread stops reading, like Kafka's requestQueue.put. */
    public void sendRequest(Request r) throws InterruptedException { requestQueue.put(r); }

    public Request receiveRequest(long timeoutMs) throws InterruptedException { return requestQueue.poll(timeoutMs, TimeUnit.MILLISECONDS); }

    /** payload == null closes the connection. */
    public void sendResponse(Request r, ByteBuffer payload) { processors[r.processor].enqueueResponse(r, payload); }

    public int size() { return requestQueue.size(); }
}
