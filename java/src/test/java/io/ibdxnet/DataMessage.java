package io.ibdxnet;

/**
 * A message with sender thread, sequence number and a payload checked on
 * receipt ({@link #intact}), of type {@link #TYPE}/{@link #DATA}: the messaging
 * suite's ({@link DXNetSuite}) and many other tests'. Its size is not declared
 * unless {@link #declare} is called (then it is serialised in place when it
 * fits a frame).
 */
public final class DataMessage extends Message {
    public static final byte TYPE = 7;
    static final byte DATA = 1;

    private static final String TEXT = "ünïcode ✓";
    int thread;
    int seq;
    byte[] payload;
    /** What payloadSize() adds to the true size; null: not declared. */
    Integer declaredError;
    /** Throw in the middle of exportPayload. */
    boolean explode;

    public DataMessage() {
        super(TYPE, DATA);
    }

    DataMessage(int dest, int thread, int seq, int size) {
        super(dest, TYPE, DATA);
        this.thread = thread;
        this.seq = seq;
        this.payload = new byte[size];
        for (int i = 0; i < size; i++) {
            payload[i] = (byte) (thread * 31 + seq + i);
        }
    }

    /** Declares its size, off by {@code error} bytes. */
    DataMessage declare(int error) {
        declaredError = error;
        return this;
    }

    @Override
    protected int payloadSize() {
        return declaredError == null ? -1 : 8 + 4 + payload.length + MessageExporter.stringSize(TEXT) + declaredError;
    }

    @Override
    protected void exportPayload(MessageExporter out) {
        out.writeInt(thread);
        out.writeInt(seq);
        if (explode) {
            throw new UnsupportedOperationException("exploded mid-export");
        }
        out.writeByteArray(payload);
        out.writeString(TEXT);
    }

    @Override
    protected void importPayload(MessageImporter in) {
        thread = in.readInt();
        seq = in.readInt();
        payload = in.readByteArray();
        if (!in.readString().equals(TEXT)) {
            throw new IllegalStateException("string mangled");
        }
    }

    boolean intact() {
        for (int i = 0; i < payload.length; i++) {
            if (payload[i] != (byte) (thread * 31 + seq + i)) {
                return false;
            }
        }
        return true;
    }
}
