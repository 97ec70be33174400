package io.ibdxnet;

/**
 * Handles received messages of one class, typed (see
 * {@link DXNet#register(Class, MessageHandler)}); runs on a message handler
 * thread. It may throw: the exception is logged and counted
 * ({@code handler_errors}), and if the message is a request the requester's
 * call ends with a {@link RemoteHandlerException} naming it.
 */
@FunctionalInterface
public interface MessageHandler<M extends Message> {
    /**
     * Handles {@code message}.
     *
     * @param message the received message
     * @throws Exception anything: logged, counted, and a request's requester gets a {@link RemoteHandlerException}
     */
    void handle(M message) throws Exception;
}
