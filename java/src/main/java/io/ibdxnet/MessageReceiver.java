package io.ibdxnet;

/** Handles incoming messages of one registered type; runs on a message handler thread. */
@FunctionalInterface
public interface MessageReceiver {
    void onIncomingMessage(Message message);
}
