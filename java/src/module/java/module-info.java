/**
 * ibdxnet: DXNet's messaging over InfiniBand (a Rust engine through JNI), TCP
 * or memory. The API is the package {@code io.ibdxnet}; every other package
 * is internal and not exported.
 *
 * <p>Message classes are created by reflection on their no-argument
 * constructor: a module that defines them must export (or open) their
 * package at least to {@code io.ibdxnet}. Run with
 * {@code --enable-native-access=io.ibdxnet} (JDK 22 and later warn without
 * it: the library loads JNI code and uses {@code java.lang.foreign}).
 */
module io.ibdxnet {
    // DXNetConfig.load reads JSON configuration files.
    requires com.google.gson;
    // The transports' and the core's logging.
    requires java.logging;
    // Direct-memory pool and VM option reads (BufferPoolMXBean, HotSpotDiagnosticMXBean).
    requires java.management;
    requires jdk.management;
    // sun.misc.Unsafe: the memory layer on JDK 17-21 (the multi-release jar's FFM one replaces it on 22+).
    requires jdk.unsupported;

    exports io.ibdxnet;
}
