import DropboxAPI
import Foundation
import Testing
import TestSupport

/// Permission modes: Dropbox keeps none, the mount keeps what chmod, open(O_CREAT) and mkdir
/// ask for (doc/SEMANTICS.md). Before, chmod succeeded and changed nothing, so a script made
/// executable could not be run, and `chmod 600` made nothing private.
@Suite("mount: permission modes", .serialized, .timeLimit(.minutes(5)))
struct ModeTests {
    /// What tools do with modes, compared with a local folder: scripts made executable and
    /// run, a private file, modes set at creation (install, mkdir -m, umask), and kept by
    /// mv, cp -a, tar and rsync -a; a removed file's mode does not pass to a new one; and
    /// access(2) (`test -r/-w/-x`) answers by them (root's mount runs without
    /// `default_permissions`: the kernel asks the mount, `checkAccess`).
    @Test func toolsSeeTheModesTheySetAsOnALocalDisk() async throws {
        try await MountFixture.with { m in
            try await ToolWorkloadTests.same(m, "modes", """
                printf '#!/bin/sh\\necho ran $0\\n' > run.sh && chmod +x run.sh && ./run.sh && \
                echo secret > key && chmod 600 key && mkdir -m 700 private && mkdir bin && \
                install -m 755 run.sh bin/tool && bin/tool && (umask 077 && echo x > mine && mkdir minedir) && \
                chmod 4755 bin/tool && chmod g+w bin && mv run.sh renamed.sh && ./renamed.sh && \
                mkdir tree && cp -a bin key private tree/ && tar -cf t.tar bin key && mkdir untar && tar -C untar -xpf t.tar && \
                rsync -a bin/ synced/ && \
                for f in key bin/tool renamed.sh private untar/key; do \
                    test -r $f && echo r $f; test -w $f && echo w $f; test -x $f && echo x $f; :; done && \
                rm key && echo again > key && \
                find . -path ./t.tar -prune -o -printf '%m %y %P\\n' | sort
                """)
        }
    }

    /// Set-user-ID and set-group-ID bits go as on a local disk: a write, a truncate or an
    /// open with O_TRUNC by another user clears them (set-group-ID only with group execute),
    /// root's write keeps them, a chown clears them even for root, one that keeps owner and
    /// group too (`chown :`, whose request the kernel does not mark); `stat` says so at once.
    /// The mount clears them itself (the kernel leaves it the job, `CFuseShim/setid.c`): with
    /// that job taken and not done, the bits stayed; before it was taken, an open with
    /// O_TRUNC by another user left them.
    @Test func setIDBitsGoAsOnALocalDiskWhenFilesAreWrittenTruncatedOrChowned() async throws {
        try await MountFixture.with(options: ["allow_other"]) { m in
            let other = "setpriv --reuid=65534 --regid=65534 --clear-groups"
            try await ToolWorkloadTests.same(m, "setid", """
                for mode in 4777 2777 2767 6777; do echo x > w$mode && chmod $mode w$mode; done && \
                echo x > trunc && chmod 6777 trunc && echo x > open && chmod 4777 open && \
                echo x > root && chmod 4777 root && echo x > owner && chmod 6775 owner && \
                \(other) sh -c 'for f in w*; do echo y >> $f; done; truncate -s 1 trunc; : > open' && \
                echo y >> root && chown root:root owner && \
                echo x > kept && chmod 6755 kept && chown : kept && echo x > nogx && chmod 2745 nogx && chown : nogx && \
                stat -c '%a %s %n' * | sort
                """)
        }
    }

    /// Owners and groups given by chown are kept here as modes are (Dropbox keeps none): `stat`
    /// shows them, `cp -a`, `tar xp` and `rsync -a` as root keep them, `mv` takes them along,
    /// and the kernel judges the owner's bits by them (`nobody` writes the file it was given,
    /// and only that one); a new mount on the same cache shows them still. Before, a chown
    /// changed nothing that `stat` showed.
    @Test func ownersGivenByChownAreShownAsOnALocalDisk() async throws {
        try await MountFixture.with(options: ["allow_other"]) { m in
            let other = "setpriv --reuid=65534 --regid=65534 --clear-groups"
            try await ToolWorkloadTests.same(m, "owners", """
                echo a > given && echo b > kept && mkdir given-dir && echo c > given-dir/inside && \
                chown 65534:65534 given && chown 1000 kept && chgrp 100 kept && chown -R 65534:100 given-dir && \
                mv kept moved && tar -cf ../owners.tar given given-dir && mkdir untar && tar -C untar -xpf ../owners.tar && \
                rm ../owners.tar && mkdir copied && cp -a given given-dir copied/ && rsync -a given-dir/ synced/ && \
                \(other) sh -c 'echo nobody >> given; (echo nobody >> moved) 2>/dev/null || echo nobody may not write moved' && \
                chown root:root untar/given && cat given && find . -printf '%u:%g %m %P\\n' | sort
                """)
            try await m.unmount()
            try await m.mount()
            let again = try await m.sh("stat -c '%u:%g %n' \"$M\"/owners/given \"$M\"/owners/moved \"$M\"/owners/given-dir/inside")
            #expect(again.stdout == "65534:65534 \(m.mountpoint)/owners/given\n1000:100 \(m.mountpoint)/owners/moved\n"
                    + "65534:100 \(m.mountpoint)/owners/given-dir/inside\n", "\(again)")
        }
    }

    /// On a mount other users reach (`allow_other`), what another user creates is theirs, with
    /// their group, as on a disk: `nobody` writes again the file it made in a shared folder,
    /// and root may not take it over by mode alone; root's creations show the mount's owner.
    /// Before, `nobody`'s file showed root as its owner (mode 644), and `nobody` could not
    /// write it again.
    @Test func whatAnotherUserCreatesIsTheirsAsOnALocalDisk() async throws {
        try await MountFixture.with(options: ["allow_other"]) { m in
            let other = "setpriv --reuid=65534 --regid=65534 --clear-groups"
            try await ToolWorkloadTests.same(m, "created", """
                mkdir shared && chmod 777 shared && \
                \(other) sh -c 'umask 022; echo a > shared/mine && mkdir shared/mydir && echo b > shared/mydir/inner && \
                    echo again >> shared/mine && cat shared/mine' && \
                echo root > shared/root-made && (\(other) sh -c 'echo no >> shared/root-made' 2>/dev/null || echo nobody may not write root-made) && \
                find shared -printf '%u:%g %m %p\\n' | sort
                """)
        }
    }

    /// A set-group-ID folder (a team's shared project folder) passes its group on to what is
    /// made in it, and the bit to the folders made there, for root and for another user, as on
    /// a disk: the kernel leaves both to the filesystem. Before, everything made there showed
    /// the mount's group (or its maker's), and a folder made there lost the bit.
    @Test func aSetGroupIDFolderPassesItsGroupOnAsOnALocalDisk() async throws {
        try await MountFixture.with(options: ["allow_other"]) { m in
            let other = "setpriv --reuid=65534 --regid=65534 --clear-groups"
            try await ToolWorkloadTests.same(m, "setgid", """
                mkdir team && chgrp 100 team && chmod 2777 team && echo a > team/root-file && mkdir team/root-dir && \
                mkdir -p team/deep/er && echo b > team/deep/er/f && \
                \(other) sh -c 'umask 022; echo c > team/their-file && mkdir team/their-dir && echo d > team/their-dir/inner' && \
                mv team/root-file moved-out && mkdir plain && echo e > plain/f && \
                find . -printf '%u:%g %m %P\\n' | sort
                """)
        }
    }

    /// What root may do, as on a local disk, on a mount only root can reach: it runs without
    /// `default_permissions` (a round trip fewer for each create and removal, `MountOptions`),
    /// so the kernel asks the mount about `access(2)` and `cd`, and checks `exec` itself. Root
    /// reads and writes whatever the modes say, enters any folder, and runs only what has an
    /// execute bit. Without an answer to `access`, every `test -x` here was true.
    @Test func rootAloneChecksAsOnALocalDiskWithoutTheKernelCheckingModes() async throws {
        try await MountFixture.with { m in
            let options = try await m.sh("grep \" $M fuse\" /proc/mounts")
            #expect(options.stdout.contains("fuse.dropboxfs") && !options.stdout.contains("default_permissions"), "\(options.stdout)")
            try await ToolWorkloadTests.same(m, "root-access", Self.accessScript)
        }
    }

    /// Shared with other users (`allow_other`), the kernel checks the shown modes itself, and
    /// `nobody` is refused what they refuse, as on a local disk; root still is not.
    @Test func otherUsersAreRefusedWhatTheModesRefuse() async throws {
        try await MountFixture.with(options: ["allow_other"]) { m in
            let options = try await m.sh("grep \" $M fuse\" /proc/mounts")
            #expect(options.stdout.contains("default_permissions"), "\(options.stdout)")
            let other = "setpriv --reuid=65534 --regid=65534 --clear-groups"
            try await ToolWorkloadTests.same(m, "shared-access", Self.accessScript + """
                 && \(other) sh -c 'for f in plain ro none tool locked shut; do \
                    test -r $f && echo nobody r $f; test -w $f && echo nobody w $f; test -x $f && echo nobody x $f; :; done; \
                    (echo no >> plain) 2>/dev/null || echo nobody may not write plain; \
                    (: > locked/new) 2>/dev/null || echo nobody may not create in locked; ./tool'
                """)
        }
    }

    /// Files and folders of every kind of mode, what `test` says of each for root, and what
    /// root manages to do with them.
    static let accessScript = """
        echo x > plain && echo y > ro && chmod 444 ro && echo z > none && chmod 000 none && \
        printf '#!/bin/sh\\necho ran\\n' > tool && chmod 755 tool && mkdir locked && chmod 700 locked && \
        mkdir shut && chmod 000 shut && \
        for f in plain ro none tool locked shut; do \
            test -r $f && echo r $f; test -w $f && echo w $f; test -x $f && echo x $f; :; done && \
        echo more >> ro && cat none ro && cd shut && cd .. && : > shut/made && ls shut && ./tool && \
        { ./plain 2>/dev/null || echo plain does not run; }
        """

    /// Kept in the cache: a remount shows them, and an executable still runs.
    @Test func modesSurviveARemount() async throws {
        try await MountFixture.with { m in
            let set = try await m.sh("""
                cd "$M" && printf '#!/bin/sh\\necho ok\\n' > tool.sh && chmod 750 tool.sh && mkdir -p a/b && chmod 711 a/b && \
                echo s > a/b/secret && chmod 400 a/b/secret && mv a moved
                """)
            #expect(set.status == 0, "\(set.stderr)")
            #expect(try await m.unmount().status == 0)
            try await m.mount()
            let shown = try await m.sh("cd \"$M\" && stat -c '%a %n' tool.sh moved/b moved/b/secret moved && ./tool.sh")
            #expect(shown.stdout == "750 tool.sh\n711 moved/b\n400 moved/b/secret\n755 moved\nok\n", "\(shown.stderr)")
        }
    }

    /// A folder renamed away and back while two processes list it (Scripts/lib/
    /// modes_while_renamed.py): its files' modes stay. Worked out at the path a listed entry
    /// had when listed, a mode showed the default in between, and the kernel kept that for
    /// the next stat: wrong modes within 15 rounds on a debug build, 400 on a release build.
    @Test func modesStayWhileAFolderIsRenamedAwayAndBackAsOthersListIt() async throws {
        try await MountFixture.with(seeds: []) { m in
            let run = try await m.sh("python3 '\(MountFixture.libraryScript("modes_while_renamed.py"))' \"$M/renamed\" 500",
                                     timeout: 240)
            #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        }
    }

    /// Another client's move takes the mode along (Dropbox keeps the entry's id); its removal
    /// drops it, so a file it puts back at the name shows the default; its edit keeps it.
    @Test func anotherClientsMovesCarryModesAndItsRemovalsDropThem() async throws {
        try await MountFixture.with { m in
            let set = try await m.sh("""
                cd "$M" && echo one > one.sh && echo two > two.sh && echo three > three.sh && mkdir -p dir/sub && echo four > dir/sub/four && \
                chmod 700 one.sh two.sh three.sh dir/sub/four && chmod 750 dir && \
                sync one.sh two.sh three.sh dir/sub/four dir/sub dir .
                """)
            #expect(set.status == 0, "\(set.stderr)")
            _ = try await m.client.rpc(Routes.move, RelocationArgument(from: "/one.sh", to: "/Documents/one.sh"))
            _ = try await m.client.rpc(Routes.move, RelocationArgument(from: "/dir", to: "/Documents/dir"))
            _ = try await m.client.rpc(Routes.delete, DeleteArgument(path: "/two.sh"))
            try await m.uploadElsewhere("new two\n", to: "/two.sh")
            try await m.uploadElsewhere("three again\n", to: "/three.sh")
            let expected = "700 Documents/one.sh\n750 Documents/dir\n700 Documents/dir/sub/four\n644 two.sh\n700 three.sh\n"
            var shown = ""
            let show = """
                cd "$M" && grep -q 'new two' two.sh && grep -q again three.sh && \
                stat -c '%a %n' Documents/one.sh Documents/dir Documents/dir/sub/four two.sh three.sh
                """
            try? await eventually("the other client's changes with their modes", timeout: 120) {
                let result = try await m.sh(show)
                shown = result.stdout + result.stderr
                return shown == expected
            }
            #expect(shown == expected, "\(m.log)")
        }
    }
    /// Another client's move of a folder whose tree spans pages of the change feed, to a name
    /// that sorts first: the feed brings the folder's arrival, then everything below it,
    /// then the removals at its old name, pages apart. The folder's mode and those below it go along. Before, only a
    /// removal whose arrival came in the same page or the one before took the modes along:
    /// the folder of a `tar x` moved by another client showed 755 instead of 700 at its new
    /// name (the many-files differential, pages of 50).
    @Test func anotherClientsMoveOfAFolderSpanningPagesCarriesTheModes() async throws {
        try await MountFixture.with(feedPageSize: 3) { m in
            let set = try await m.sh("""
                cd "$M" && mkdir -p big/sub && for i in 1 2 3 4 5 6 7 8 9 10; do echo $i > big/f$i; done && \
                echo deep > big/sub/deep && chmod 700 big && chmod 750 big/sub && chmod 600 big/sub/deep big/f9 && \
                sync big/f* big/sub/deep big/sub big .
                """)
            #expect(set.status == 0, "\(set.stderr)")
            _ = try await m.client.rpc(Routes.move, RelocationArgument(from: "/big", to: "/aside"))
            let expected = "700 aside\n600 aside/f9\n750 aside/sub\n600 aside/sub/deep\n"
            var shown = ""
            try? await eventually("the moved folder with its modes", timeout: 120) {
                let result = try await m.sh("cd \"$M\" && test ! -e big && stat -c '%a %n' aside aside/f9 aside/sub aside/sub/deep")
                shown = result.stdout + result.stderr
                return shown == expected
            }
            #expect(shown == expected, "\(m.log)")
        }
    }

    /// Another client's move of a file made while the mount was away, heard in the next
    /// mount's first catch-up among nine other changes (pages of 3): the mode kept in the
    /// cache goes along to the new name. (The feed brings a change's entries together, sorted
    /// by path, after those of the changes before it: the move's arrival and removal come in
    /// one page or two in a row, however many files sort between the two names.)
    @Test func anotherClientsMoveWhileTheMountWasAwayCarriesTheMode() async throws {
        try await MountFixture.with(feedPageSize: 3) { m in
            let set = try await m.sh("cd \"$M\" && echo kept > zz && chmod 600 zz && sync zz .")
            #expect(set.status == 0, "\(set.stderr)")
            try await m.unmount()
            for i in 1...9 {
                _ = try await m.client.upload(Routes.upload, UploadArgument(CommitInfo(path: "/m\(i)"), contentHash: nil), body: .bytes([65]))
            }
            _ = try await m.client.rpc(Routes.move, RelocationArgument(from: "/zz", to: "/aa"))
            try await m.mount()
            try await eventually("the move shown", timeout: 120) {
                try await m.sh("cd \"$M\" && test ! -e zz && test -e aa && test -e m9").status == 0
            }
            let shown = try await m.sh("cd \"$M\" && stat -c '%a %n' aa")
            #expect(shown.stdout == "600 aa\n", "\(m.log)")
        }
    }

    /// What a descriptor open on a file or folder shows after another client moved it:
    /// the mode and owner it had, as the same inode does on a local disk after a rename.
    /// Another client's move goes through the change feed as a removal and an arrival: the
    /// inode held at the old name is detached, and the kept mode went with the entry to its
    /// new name, so fstat showed the default (the four-at-once differential: mkdir c, open
    /// c, chown c 0:65534, another client's move of c, fstat).
    @Test func aDescriptorKeepsTheModeAndOwnerOfWhatAnotherClientMoved() async throws {
        try await MountFixture.with { m in
            let set = try await m.sh("""
                cd "$M" && mkdir folder && echo one > file && chmod 700 folder && chmod 600 file && \
                chown 0:65534 folder file && sync file folder .
                """)
            #expect(set.status == 0, "\(set.stderr)")
            let (folder, file) = (m.mountpoint + "/folder", m.mountpoint + "/file")
            let folderFD = try await offPool { try Sys.open(folder, O_RDONLY).value("open folder") }
            let fileFD = try await offPool { try Sys.open(file, O_RDONLY).value("open file") }
            defer { _ = Sys.close(folderFD); _ = Sys.close(fileFD) }
            _ = try await m.client.rpc(Routes.move, RelocationArgument(from: "/folder", to: "/moved-folder"))
            _ = try await m.client.rpc(Routes.move, RelocationArgument(from: "/file", to: "/moved-file"))
            try await eventually("the moves shown", timeout: 120) {
                try await offPool { (try? Sys.stat(m.mountpoint + "/moved-folder").get()) != nil && (try? Sys.stat(m.mountpoint + "/moved-file").get()) != nil }
            }
            let shown = try await offPool { (try Sys.fstat(folderFD).get(), try Sys.fstat(fileFD).get()) }
            #expect("\(shown.0)" == "dir 700 0:65534")
            #expect("\(shown.1)" == "file(4, 600 0:65534)")
            let atNewNames = try await m.sh("cd \"$M\" && stat -c '%a %u:%g %n' moved-folder moved-file")
            #expect(atNewNames.stdout == "700 0:65534 moved-folder\n600 0:65534 moved-file\n", "\(atNewNames.stderr)")
        }
    }
}
