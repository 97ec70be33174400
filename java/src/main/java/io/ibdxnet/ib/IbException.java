package io.ibdxnet.ib;

import java.io.IOException;

/** A failed InfiniBand engine operation (connection timeout, fabric error, ...). */
public class IbException extends IOException {
    private static final long serialVersionUID = 1L;

    public IbException(String message) {
        super(message);
    }
}
