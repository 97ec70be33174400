package io.ibdxnet.compat;

import de.hhu.bsinfo.dxnet.ib.MsgrcJNIBinding;

/**
 * A JVM as upstream's {@code DXNetMain} sets one up: no io.ibdxnet class on the
 * class path, the library {@code System.load}ed by path (args[0]), then
 * upstream's binding initialised and shut down. Uses nothing of ours, so the
 * library's {@code JNI_OnLoad} finds no {@code io.ibdxnet.ib.NativeLibrary}.
 * Exit 0 and "UPSTREAM-ONLY OK" on success.
 */
public final class UpstreamOnlyMain {
    private UpstreamOnlyMain() {}

    public static void main(String[] args) {
        System.load(args[0]);
        System.load(args[0]); // DXNetMain loads every file of its jni directory: a second load is a no-op
        MsgrcJNIBinding.CallbackHandler handler = new MsgrcJNIBinding.CallbackHandler() {
            @Override
            public void nodeDiscovered(short nodeId) {}

            @Override
            public void nodeInvalidated(short nodeId) {}

            @Override
            public void nodeDisconnected(short nodeId) {}

            @Override
            public int received(long ring) {
                return 0;
            }

            @Override
            public void getNextDataToSend(long next, long prev, long completionList) {}
        };
        if (!MsgrcJNIBinding.init(handler, false, false, 0, (short) 5, 1000, 10, 8, 32, 100, 100, 1 << 16,
                1024L * 4096, 4096, 4)) {
            System.out.println("init failed");
            System.exit(1);
        }
        if (MsgrcJNIBinding.createConnection((short) 6) != 2 || MsgrcJNIBinding.getSendBufferAddress((short) 6) != -1) {
            System.out.println("unknown node not refused");
            System.exit(1);
        }
        if (!MsgrcJNIBinding.shutdown()) {
            System.exit(1);
        }
        System.out.println("UPSTREAM-ONLY OK");
    }
}
