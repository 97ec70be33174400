/**
 * The bottom layer: access to native memory by address ({@link io.ibdxnet.memory.Memory}).
 * Imports nothing of ibdxnet; every other package may import it.
 */
package io.ibdxnet.memory;
