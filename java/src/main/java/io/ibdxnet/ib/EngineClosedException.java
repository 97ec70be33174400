package io.ibdxnet.ib;

/**
 * A call reached the engine after it was destroyed: a close racing a
 * transport thread. Its own type so that callers expecting the race catch
 * only this, never an unrelated {@link IllegalStateException}.
 */
public final class EngineClosedException extends IllegalStateException {
    private static final long serialVersionUID = 1L;

    EngineClosedException() {
        super("engine is closed");
    }

    /** Thrown by the native library (JNI {@code ThrowNew}) to a call that raced {@code close()}. */
    EngineClosedException(String message) {
        super(message);
    }
}
