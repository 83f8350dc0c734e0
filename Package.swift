// swift-tools-version:6.0
import PackageDescription

/// The linker reads files of the package by absolute path (it runs from another directory).
let packageDirectory = String(#filePath.dropLast("/Package.swift".count))

let package = Package(
    name: "Couchette",
    platforms: [.macOS(.v13)],
    products: [
        .library(name: "CouchCore", targets: ["CouchCore"]),
        .library(name: "CouchStore", targets: ["CouchStore"]),
        .library(name: "CouchServer", targets: ["CouchServer"]),
        .library(name: "CouchReplication", targets: ["CouchReplication"]),
        .library(name: "CouchFunctions", targets: ["CouchFunctions"]),
        .library(name: "CouchIndex", targets: ["CouchIndex"]),
        .library(name: "CouchMango", targets: ["CouchMango"]),
        .executable(name: "couchette", targets: ["couchette"]),
        .executable(name: "couchette-functions", targets: ["couchette-functions"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // C libraries from Debian's -dev packages, reached through module maps.
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", path: "Sources/CMicroHTTPD", pkgConfig: "libmicrohttpd",
                       providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl",
                       providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CCrypto", path: "Sources/CCrypto", pkgConfig: "libcrypto",
                       providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CZlib", path: "Sources/CZlib", pkgConfig: "zlib",
                       providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CJavaScriptCore", path: "Sources/CJavaScriptCore", pkgConfig: "javascriptcoregtk-4.1",
                       providers: [.apt(["libjavascriptcoregtk-4.1-dev"])]),
        // ICU's collator (Debian's libicu-dev) behind a header of its own: CouchDB's string order.
        .target(name: "CCollation", linkerSettings: [.linkedLibrary("icui18n"), .linkedLibrary("icuuc")]),
        // Mango's `$regex` on Debian's RE2 (libre2-dev), whose matching is linear in the text,
        // behind a C interface (one small C++ file).
        .target(name: "CRegex", linkerSettings: [.linkedLibrary("re2")]),
        // Typed wrappers for the variadic C functions Swift cannot call.
        .target(name: "CShims", dependencies: ["CMicroHTTPD", "CCurl"]),

        .target(name: "CouchCore", dependencies: ["CCrypto", "CZlib", "CCollation", "CRegex"]),
        .target(name: "CouchStore", dependencies: [
            "CouchCore", "CSQLite", .product(name: "Logging", package: "swift-log"),
        ]),
        // Design-document functions: validation, filters, views, shows... run in worker processes
        // (one database's each), and native Swift functions. The server never loads the engine.
        .target(name: "CouchFunctions", dependencies: [
            "CouchCore", .product(name: "Logging", package: "swift-log"),
        ]),
        // The worker's side: the JavaScript engine with CouchDB's environment.
        .target(name: "CouchFunctionsEngine", dependencies: ["CouchCore", "CouchFunctions", "CJavaScriptCore"]),
        .executableTarget(name: "couchette-functions", dependencies: ["CouchFunctionsEngine"]),
        // Indexes derived from a database (views, Mango's JSON indexes): SQLite files beside it.
        .target(name: "CouchIndex", dependencies: [
            "CouchCore", "CouchStore", "CouchFunctions", .product(name: "Logging", package: "swift-log"),
        ]),
        // Mango queries: `_find`'s options, the planner, index definitions (JSON indexes on
        // CouchIndex), text indexes on SQLite FTS5.
        .target(name: "CouchMango", dependencies: ["CouchCore", "CouchStore", "CouchIndex"]),
        // An HTTP client on libcurl that knows nothing of CouchDB.
        .target(name: "CurlClient", dependencies: ["CCurl", "CShims"]),
        // The replicator: endpoints (local store or remote HTTP), stages, checkpoints, jobs.
        .target(name: "CouchReplication", dependencies: [
            "CouchCore", "CouchStore", "CouchFunctions", "CurlClient", "CCrypto",
            .product(name: "Logging", package: "swift-log"),
        ]),
        .target(name: "CouchServer", dependencies: [
            "CouchCore", "CouchStore", "CouchFunctions", "CouchIndex", "CouchMango", "CouchReplication", "CMicroHTTPD",
            "CShims",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "Metrics", package: "swift-metrics"), .product(name: "Prometheus", package: "swift-prometheus"),
        ]),
        // Linked by the toolchain's lld, for two savings in a server's resident memory:
        // packed relative relocations (glibc 2.36's DT_RELR), so that the position-independent
        // executable's 80,000 relocations take 16 KB instead of the 2 MB the loader read; and
        // the functions a server runs while it starts placed together, in the order of
        // startup-order.txt (written by scripts/order-startup-code), where they were spread
        // over the whole 19 MB of code and the kernel mapped 64 KB around each one.
        .executableTarget(name: "couchette", dependencies: [
            "CouchServer", "CouchReplication", "CouchFunctions", "CouchStore", "CouchCore",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ], exclude: ["startup-order.txt"], linkerSettings: [
            .unsafeFlags(["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                          "-Xlinker", "--symbol-ordering-file=\(packageDirectory)/Sources/couchette/startup-order.txt",
                          "-Xlinker", "--no-warn-symbol-ordering"],
                         .when(platforms: [.linux])),
        ]),

        .target(name: "CouchTestSupport", dependencies: [
                    "CouchCore", "CouchServer", "CouchStore", "CSQLite", .product(name: "Logging", package: "swift-log"),
                ],
                path: "Tests/CouchTestSupport"),
        .testTarget(name: "CouchCoreTests", dependencies: ["CouchCore"]),
        .testTarget(name: "CouchStoreTests", dependencies: ["CouchStore", "CouchCore", "CouchTestSupport"]),
        .testTarget(name: "CouchReplicationTests", dependencies: [
            "CouchReplication", "CurlClient", "CouchServer", "CouchStore", "CouchCore", "CouchTestSupport",
        ], exclude: ["Support/tls_proxy.py"]),
        .testTarget(name: "CouchServerTests", dependencies: ["CouchServer", "CouchCore", "CouchTestSupport"]),
        .testTarget(name: "CouchIndexTests", dependencies: [
            "CouchIndex", "CouchFunctions", "CouchServer", "CouchStore", "CouchCore", "CouchTestSupport",
        ]),
        .testTarget(name: "CouchFunctionsTests", dependencies: [
            "CouchFunctions", "CouchFunctionsEngine", "CouchServer", "CouchReplication", "CouchStore", "CouchCore", "CouchTestSupport",
        ]),
    ],
    swiftLanguageModes: [.v6]
)
