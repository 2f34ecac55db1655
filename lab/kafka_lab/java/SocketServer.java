package kafka.network;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;
import java.util.concurrent.ConcurrentLinkedQueue;

import kafka.utils.Logger;

/** One acceptor and num.network.threads NIO processors, with Kafka's thread names and muting behaviour. */
public final class SocketServer {
    private final int brokerId;
    private final String host;
    private final int port;
    private final Processor[] processors;
    public final RequestChannel requestChannel;
    private ServerSocketChannel serverChannel;
    private Thread acceptor;
    private volatile boolean running = true;

    public SocketServer(int brokerId, String host, int port, int numNetworkThreads, int queuedMaxRequests) {
        this.brokerId = brokerId;
        this.host = host;
        this.port = port;
        this.requestChannel = new RequestChannel(queuedMaxRequests);
        this.processors = new Processor[numNetworkThreads];
    }

    public void startup() throws IOException {
        for (int i = 0; i < processors.length; i++) processors[i] = new Processor(i, brokerId, requestChannel);
        requestChannel.setProcessors(processors);
        serverChannel = ServerSocketChannel.open();
        serverChannel.socket().setReuseAddress(true);
        serverChannel.bind(new InetSocketAddress(host, port), 50);
        Logger.info("kafka.network.Acceptor", "Awaiting socket connections on " + host + ":" + port + ".");
        for (Processor p : processors) p.start();
        acceptor = new Thread(this::acceptLoop, "kafka-socket-acceptor-PLAINTEXT-" + port);
        acceptor.start();
        Logger.info("kafka.network.SocketServer", "[Socket Server on Broker " + brokerId + "], Started 1 acceptor threads");
    }

    private void acceptLoop() {
        int current = 0;
        while (running) {
            try {
                SocketChannel ch = serverChannel.accept();
                ch.configureBlocking(false);
                ch.socket().setTcpNoDelay(true);
                processors[current].accept(ch);
                current = (current + 1) % processors.length;
            } catch (IOException e) {
                if (!running) return;
                Logger.error("kafka.network.Acceptor", "Error while accepting connection", e.toString());
            }
        }
    }

    public void shutdown() {
        Logger.info("kafka.network.SocketServer", "[Socket Server on Broker " + brokerId + "], Shutting down");
        running = false;
        try { serverChannel.close(); } catch (IOException ignored) { }
        for (Processor p : processors) if (p != null) p.shutdown();
        Logger.info("kafka.network.SocketServer", "[Socket Server on Broker " + brokerId + "], Shutdown completed");
    }
}

final class Processor extends Thread {
    private final int id;
    private final RequestChannel requestChannel;
    private final Selector selector;
    private final ConcurrentLinkedQueue<SocketChannel> newConnections = new ConcurrentLinkedQueue<>();
    private final ConcurrentLinkedQueue<Object[]> responses = new ConcurrentLinkedQueue<>();
    private volatile boolean running = true;

    static final class Conn {
        final String id;
        final ByteBuffer sizeBuf = ByteBuffer.allocate(4);
        ByteBuffer payload;
        Conn(String id) { this.id = id; }
    }

    Processor(int id, int brokerId, RequestChannel requestChannel) throws IOException {
        super("kafka-network-thread-" + brokerId + "-PLAINTEXT-" + id);
        this.id = id;
        this.requestChannel = requestChannel;
        this.selector = Selector.open();
    }

    void accept(SocketChannel ch) {
        newConnections.add(ch);
        selector.wakeup();
    }

    void enqueueResponse(RequestChannel.Request r, ByteBuffer payload) {
        responses.add(new Object[] {r, payload});
        selector.wakeup();
    }

    void shutdown() {
        running = false;
        selector.wakeup();
    }

    @Override
    public void run() {
        while (running) {
            try {
                configureNewConnections();
                processNewResponses();
                selector.select(300);
                Iterator<SelectionKey> it = selector.selectedKeys().iterator();
                while (it.hasNext()) {
                    SelectionKey key = it.next();
                    it.remove();
                    if (key.isValid() && key.isReadable()) read(key);
                }
            } catch (InterruptedException e) {
                break;
            } catch (Throwable t) {
                Logger.error("kafka.network.Processor", "Processor got uncaught exception.", t.toString());
            }
        }
        for (SelectionKey k : selector.keys()) close(k);
        try { selector.close(); } catch (IOException ignored) { }
    }

    private void configureNewConnections() throws IOException {
        SocketChannel ch;
        while ((ch = newConnections.poll()) != null) {
            String cid = ch.socket().getLocalAddress().getHostAddress() + ":" + ch.socket().getLocalPort() + "-"
                    + ch.socket().getInetAddress().getHostAddress() + ":" + ch.socket().getPort();
            ch.register(selector, SelectionKey.OP_READ, new Conn(cid));
        }
    }

    private void processNewResponses() {
        Object[] r;
        while ((r = responses.poll()) != null) {
            RequestChannel.Request req = (RequestChannel.Request) r[0];
            ByteBuffer payload = (ByteBuffer) r[1];
            SelectionKey key = (SelectionKey) req.channelKey;
            if (!key.isValid()) continue;
            if (payload == null) { close(key); continue; }
            ByteBuffer out = ByteBuffer.allocate(8 + payload.remaining());
            out.putInt(4 + payload.remaining()).putInt(req.correlationId).put(payload).flip();
            try {
                SocketChannel ch = (SocketChannel) key.channel();
                long deadline = System.currentTimeMillis() + 1000;
                while (out.hasRemaining() && System.currentTimeMillis() < deadline) {
                    if (ch.write(out) == 0) Thread.sleep(1);
                }
                if (out.hasRemaining()) { close(key); continue; }
                key.interestOps(SelectionKey.OP_READ); // unmute
            } catch (Exception e) {
                close(key);
            }
        }
    }

    private void read(SelectionKey key) throws InterruptedException {
        Conn c = (Conn) key.attachment();
        SocketChannel ch = (SocketChannel) key.channel();
        try {
            if (c.payload == null) {
                if (ch.read(c.sizeBuf) < 0) { close(key); return; }
                if (c.sizeBuf.hasRemaining()) return;
                c.sizeBuf.flip();
                int size = c.sizeBuf.getInt();
                c.sizeBuf.clear();
                if (size < 0 || size > 104857600) {
                    Logger.warn("kafka.network.Processor", "Unexpected error from " + c.id + "; closing connection",
                            "org.apache.kafka.common.network.InvalidReceiveException: Invalid receive (size = " + size + ")");
                    close(key);
                    return;
                }
                c.payload = ByteBuffer.allocate(size);
            }
            if (ch.read(c.payload) < 0) { close(key); return; }
            if (c.payload.hasRemaining()) return;
            ByteBuffer buf = c.payload;
            c.payload = null;
            buf.flip();
            RequestChannel.Request req;
            try {
                short apiKey = buf.getShort();
                short apiVersion = buf.getShort();
                int corr = buf.getInt();
                short len = buf.getShort();
                String clientId = "";
                if (len >= 0) {
                    byte[] b = new byte[len];
                    buf.get(b);
                    clientId = new String(b, StandardCharsets.UTF_8);
                }
                if (apiKey < 0 || apiKey > 20)
                    throw new IllegalArgumentException("Unexpected ApiKeys id `" + apiKey + "`, it should be between `0` and `20` (inclusive)");
                req = new RequestChannel.Request(id, c.id, apiKey, apiVersion, corr, clientId, buf.slice(), key);
            } catch (RuntimeException e) {
                Logger.error("kafka.network.Processor", "Closing socket for " + c.id + " because of error", e.getClass().getName() + ": " + e.getMessage());
                close(key);
                return;
            }
            key.interestOps(0); // mute until the response is sent
            requestChannel.sendRequest(req);
        } catch (IOException e) {
            close(key);
        }
    }

    private void close(SelectionKey key) {
        key.cancel();
        try { key.channel().close(); } catch (IOException ignored) { }
    }
}
