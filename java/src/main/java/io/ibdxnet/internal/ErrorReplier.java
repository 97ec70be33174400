package io.ibdxnet.internal;

import io.ibdxnet.Request;

/** How a failed request handler is answered (through the send path). */
public interface ErrorReplier {
    void answerWithError(Request<?> request, Throwable e);
}
