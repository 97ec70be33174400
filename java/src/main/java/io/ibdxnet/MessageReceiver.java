package io.ibdxnet;

/** Handles incoming messages of one registered type; runs on a message handler thread. */
@FunctionalInterface
public interface MessageReceiver {
    /**
     * Handles {@code message}.
     *
     * @param message the received message
     */
    void onIncomingMessage(Message message);
}
