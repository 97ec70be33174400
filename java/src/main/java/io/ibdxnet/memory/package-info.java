/**
 * The bottom layer: access to native memory by address ({@link io.ibdxnet.memory.Memory}),
 * and memory committed as it is used and given back: anonymous mappings on JDK 22+
 * ({@link io.ibdxnet.memory.Pages}), unlinked files in a tmpfs on every JDK
 * ({@link io.ibdxnet.memory.FilePages}).
 * Imports nothing of ibdxnet; every other package may import it.
 */
package io.ibdxnet.memory;
