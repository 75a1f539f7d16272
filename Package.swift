// swift-tools-version:6.0
// dropboxfs: a Dropbox account mounted as a Linux filesystem. See README.md and doc/.
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "dropboxfs",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "dropbox-emulator", targets: ["dropbox-emulator"]),
        .executable(name: "dropboxfs", targets: ["dropboxfs"]),
        .library(name: "DropboxEmulator", targets: ["DropboxEmulator"]),
        .library(name: "DropboxAPI", targets: ["DropboxAPI"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        // Tests only: generation and shrinking of random operation sequences.
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
    ],
    targets: [
        // C shims: thin, typed forwards to system libraries Swift cannot call directly.
        .target(name: "CSQLite", linkerSettings: [.linkedLibrary("sqlite3")]),
        // A small Swift wrapper over SQLite, shared infrastructure (no Dropbox logic).
        .target(name: "SQLiteStore", dependencies: ["CSQLite"], swiftSettings: strictSettings),
        .target(name: "CCryptoShim", linkerSettings: [.linkedLibrary("crypto")]),
        .target(name: "CCurlShim", linkerSettings: [.linkedLibrary("curl")]),
        .target(
            name: "CFuseShim",
            path: "CFuseShim",
            linkerSettings: [.linkedLibrary("fuse3"), .linkedLibrary("pthread")]
        ),

        // The filesystem core: metadata store, block cache, reader, change watcher, errno
        // mapping, and the thin FUSE adapter.
        .target(
            name: "DropboxFS",
            dependencies: ["DropboxAPI", "CFuseShim", "SQLiteStore"],
            swiftSettings: strictSettings
        ),

        // The Dropbox API v2 client: transport on libcurl, routes, errors, OAuth, transfers.
        .target(
            name: "DropboxAPI",
            dependencies: ["CCurlShim", "CCryptoShim"],
            swiftSettings: strictSettings
        ),
        // The command-line tool. Its folder is not named after it: `Sources/DropboxFS` beside a
        // `Sources/dropboxfs` is one name on Dropbox, and a clone of this repository into a mount
        // could not check out the second (names differing only in case are one there).
        .executableTarget(
            name: "dropboxfs",
            dependencies: [
                "DropboxAPI", "DropboxFS", "SQLiteStore", "CFuseShim",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/dropboxfs-cli",
            swiftSettings: strictSettings
        ),

        .target(
            name: "DropboxEmulator",
            dependencies: [
                "SQLiteStore", "CCryptoShim",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "dropbox-emulator",
            dependencies: [
                "DropboxEmulator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "DropboxAPITests",
            dependencies: ["DropboxAPI", "DropboxEmulator", "TestSupport", .product(name: "PropertyBased", package: "swift-property-based")],
            swiftSettings: strictSettings
        ),
        .target(
            name: "TestSupport",
            dependencies: ["DropboxAPI", "DropboxEmulator", "CFuseShim", .product(name: "PropertyBased", package: "swift-property-based")],
            path: "Tests/TestSupport",
            swiftSettings: strictSettings
        ),
        // The core driven in-process, without a kernel: a model of the VFS calls the core.
        .testTarget(
            name: "DropboxFSTests",
            dependencies: [
                "DropboxFS", "DropboxAPI", "DropboxEmulator", "TestSupport", "CFuseShim",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "DropboxFSCLITests",
            dependencies: ["DropboxEmulator", "DropboxAPI", "TestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "MountTests",
            dependencies: [
                "DropboxEmulator", "DropboxAPI", "TestSupport",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "DropboxEmulatorTests",
            dependencies: ["DropboxEmulator", "TestSupport", .product(name: "PropertyBased", package: "swift-property-based")],
            swiftSettings: strictSettings
        ),
    ]
)
