/// Sequences the differential suite found and shrank, kept by name: each failed once. Both
/// the mount's and the core's differential suites run them.
public enum KeptSequences {
    public static let all: [(name: String, operations: [Step])] = [
        // Core seed 18134747715428256757 (random): after a case-only rename there and back
        // and an unlink, a rename to the name failed with EEXIST.
        ("a rename to a name unlinked after a case-only rename there and back", [
            .open(path: 9, mode: Step.OpenMode.all[3]),  // été, RDWR|CREAT (left open)
            .settle,
            .mkdir(path: 1),  // b
            .caseRename(path: 9),  // été → ÉTÉ → été
            .unlink(path: 9),  // été
            .rename(from: 1, to: 9),  // b → été
        ]),
        // Found by hand (`mkdir d; mv d e; mkdir e/y; mv e/y z; mv e d; rmdir d`): the rmdir
        // took the new folder back, checking for pending changes below it only where it was
        // then. A new folder made in it at the name it passed through (`e`) was still to be
        // sent: making that on Dropbox made `e` too, and the rename of `e` back to `d` that
        // followed left `d` on Dropbox.
        ("an rmdir of a new folder that came back from a name where a subfolder was made", [
            .mkdir(path: 3),  // d
            .rename(from: 3, to: 6),  // d → e
            .mkdir(path: 7),  // e/f
            .rename(from: 7, to: 0),  // e/f → a
            .rename(from: 6, to: 3),  // e → d
            .rmdir(path: 3),  // d
        ]),
        // Core, DROPBOXFS_DIFF_MIX=tree, seed 6186331369957649986: the rmdir took the new
        // folder back while a new folder and a rename below it were pending; sending those
        // made it on Dropbox again, and it stayed there. (Dropbox's folders were not compared
        // at the end until then: its files only.)
        ("an rmdir of a new folder whose new subfolder was renamed out", [
            .mkdir(path: 6),  // e
            .mkdir(path: 7),  // e/f
            .rename(from: 7, to: 0),  // e/f → a
            .rmdir(path: 6),  // e
        ]),
        // Mount seed 10812688823093167958, shrunk with DROPBOXFS_DIFF_DROP: a rename over a
        // file at the name a new folder was renamed away from took that folder back (its
        // record keeps the old name until the rename is sent): the renamed folder vanished.
        ("a rename over a name a new folder was renamed away from", [
            .open(path: 3, mode: Step.OpenMode.all[7]),  // d, RDWR|CREAT|EXCL
            .mkdir(path: 0),  // a
            .rename(from: 0, to: 1),  // a → b
            .open(path: 0, mode: Step.OpenMode.all[3]),  // a, RDWR|CREAT
            .rename(from: 3, to: 0),  // d → a
        ]),
        // Seed 8674040872121054176: a rename over a new folder not yet sent took it back
        // without looking inside (renames queued: the folder had not been made first).
        ("a rename over a new folder that is not empty", [
            .mkdir(path: 2),  // c
            .mkdir(path: 6),  // e
            .mkdir(path: 7),  // e/f
            .rename(from: 2, to: 6),  // c → e: ENOTEMPTY
        ]),
        // Seed 28: a descriptor whose file was uploaded by `settle`, then renamed: its next
        // write recreated the file at the old name (renames moved only queued versions).
        ("a write through a descriptor after its uploaded file was renamed", [
            .open(path: 0, mode: Step.OpenMode.all[6]),  // a, WRONLY|CREAT|APPEND
            .settle,
            .rename(from: 0, to: 2),  // a → c
            .write(slot: 0, offset: 4_198_318, length: 1845, fill: 35),
        ]),
        // Seed 40: two descriptors on one file; the newer version (written through the
        // second) went up, then a write through the first copied its own older version.
        ("a write through a descriptor whose version an upload overtook", [
            .open(path: 1, mode: Step.OpenMode.all[4]),  // b, WRONLY|CREAT|TRUNC
            .open(path: 1, mode: Step.OpenMode.all[1]),  // b, WRONLY
            .fdatasync(slot: 0),
            .write(slot: 1, offset: 0, length: 249, fill: 144),
            .settle,
            .write(slot: 0, offset: 17748, length: 3129, fill: 231),
        ]),
        // Seed 267: two descriptors of an uploaded, then unlinked file; a write through one
        // made it a copy of its own, and the other descriptor saw the old bytes.
        ("two descriptors of an unlinked file stay one file", [
            .open(path: 0, mode: Step.OpenMode.all[6]),  // a, WRONLY|CREAT|APPEND
            .open(path: 0, mode: Step.OpenMode.all[1]),  // a, WRONLY
            .settle,
            .unlink(path: 0),
            .write(slot: 2, offset: 8715, length: 4681, fill: 250),
            .fstat(slot: 2),
            .write(slot: 1, offset: 0, length: 1145, fill: 244),
        ]),
        // Seed 267 again, shrunk another way: one descriptor's copy of an uploaded version
        // left the other on the old one, and unlink detached the two apart.
        ("descriptors on one file meet on its newest version before an unlink", [
            .open(path: 3, mode: Step.OpenMode.all[7]),  // d, RDWR|CREAT|EXCL
            .open(path: 0, mode: Step.OpenMode.all[6]),  // a, WRONLY|CREAT|APPEND
            .open(path: 0, mode: Step.OpenMode.all[1]),  // a, WRONLY
            .close(slot: 0),
            .fdatasync(slot: 3),
            .ftruncate(slot: 3, size: 289),
            .unlink(path: 0),
            .fstat(slot: 2),
            .write(slot: 3, offset: 7350, length: 1699, fill: 137),
            .write(slot: 1, offset: 0, length: 1145, fill: 244),
        ]),
        // Random seed 7147799350810443445: a reader opened on the uploaded revision did not
        // see bytes written afterwards through another descriptor of the same file.
        ("a reader of the uploaded revision sees later writes through another descriptor", [
            .open(path: 2, mode: Step.OpenMode.all[4]),  // c, WRONLY|CREAT|TRUNC
            .fsync(slot: 2),
            .open(path: 2, mode: Step.OpenMode.all[0]),  // c, RDONLY
            .write(slot: 2, offset: 8050, length: 978, fill: 161),
            .read(slot: 3, offset: 6368, length: 3572),
        ]),
        // Random seed 10085368776055210291: fstat of an open folder after rmdir was ENOENT.
        ("an open folder outlives its name", [
            .mkdir(path: 1), .open(path: 1, mode: Step.OpenMode.all[0]), .rmdir(path: 1), .fstat(slot: 0),
        ]),
        // Random seed 14938685451778521259: a reader of the uploaded revision, then unlink,
        // then writes through the other descriptor: the reader kept the old snapshot.
        ("a reader follows writes to its file after unlink", [
            .open(path: 6, mode: Step.OpenMode.all[5]),  // e, RDWR|CREAT|TRUNC
            .open(path: 0, mode: Step.OpenMode.all[5]),  // a, RDWR|CREAT|TRUNC
            .settle,
            .open(path: 0, mode: Step.OpenMode.all[0]),  // a, RDONLY
            .close(slot: 0),
            .unlink(path: 0),
            .write(slot: 0, offset: 4_196_802, length: 4773, fill: 27),
            .read(slot: 2, offset: 4_193_263, length: 155_250),
        ]),
        // Random seed 7252249212181308871 (timing-dependent): a reader of revision R1 read
        // after the file's next version had gone up as R2 and its writers had closed; it
        // kept R1, since only local versions led from R1 to R2.
        ("a reader follows our own commits made from its revision", [
            .open(path: 2, mode: Step.OpenMode.all[3]),  // c, RDWR|CREAT
            .fsync(slot: 0),
            .open(path: 2, mode: Step.OpenMode.all[0]),  // c, RDONLY
            .write(slot: 0, offset: 4_194_648, length: 55_340, fill: 118),
            .settle,
            .close(slot: 0),
            .read(slot: 0, offset: 4_195_878, length: 4810),
        ]),
        // Random seed 4127771327400085788 (the core's suite): a reader of the first upload,
        // two more uploads from it (a truncate, then an O_TRUNC open), then a write through
        // the last writer: the reader saw none of it.
        ("a reader follows a chain of our own commits and the write after them", [
            .open(path: 0, mode: Step.OpenMode.all[6]),  // a, WRONLY|CREAT|APPEND
            .fsync(slot: 0),
            .open(path: 0, mode: Step.OpenMode.all[0]),  // a, RDONLY
            .ftruncate(slot: 0, size: 5810),
            .fsync(slot: 0),
            .open(path: 0, mode: Step.OpenMode.all[4]),  // a, WRONLY|CREAT|TRUNC
            .fsync(slot: 2),
            .close(slot: 0),
            .write(slot: 3, offset: 4_190_950, length: 154_931, fill: 205),
            .read(slot: 2, offset: 4_196_389, length: 103),
        ]),
        // Not found by the suite (a stress of processes writing and listing one folder): a
        // folder opened, then a file in it written and truncated, then the folder read. The
        // readdirplus answer gave the kernel each file's size as the folder's snapshot had
        // it: stat and reads then saw the old size (an append after it wrote over lines).
        ("a folder read after files in it were written since it was opened", [
            .open(path: 0, mode: Step.OpenMode.all[3]),  // a, RDWR|CREAT
            .write(slot: 0, offset: 0, length: 500, fill: 3),
            .close(slot: 0),
            .mkdir(path: 3),  // d
            .open(path: 4, mode: Step.OpenMode.all[3]),  // d/a, RDWR|CREAT
            .write(slot: 0, offset: 0, length: 7000, fill: 4),
            .fsync(slot: 0),
            .close(slot: 0),
            .openFolder(path: -1),
            .openFolder(path: 3),  // d
            .open(path: 0, mode: Step.OpenMode.all[6]),  // a, WRONLY|CREAT|APPEND
            .write(slot: 2, offset: 0, length: 900, fill: 5),
            .close(slot: 2),
            .truncate(path: 4, size: 100),  // d/a
            .listOpen(slot: 0),
            .listOpen(slot: 1),
            .open(path: 0, mode: Step.OpenMode.all[6]),  // a again
            .write(slot: 2, offset: 0, length: 10, fill: 6),
            .close(slot: 2),
            .stat(path: 0),
            .open(path: 4, mode: Step.OpenMode.all[0]),  // d/a, RDONLY
            .read(slot: 2, offset: 0, length: 8000),
        ]),
        // Not found by the suite: another client's moves and deletes of files closed here.
        ("files moved and deleted elsewhere", [
            .open(path: 0, mode: Step.OpenMode.all[3]),  // a, RDWR|CREAT
            .write(slot: 0, offset: 0, length: 5000, fill: 1),
            .close(slot: 0),
            .mkdir(path: 3),  // d
            .remoteRename(from: 0, to: 5),  // a → d/b
            .stat(path: 0),
            .list(path: 3),
            .open(path: 5, mode: Step.OpenMode.all[2]),  // d/b, RDWR
            .read(slot: 0, offset: 0, length: 6000),
            .close(slot: 0),
            .remoteDelete(path: 5),
            .list(path: 3),
            .rmdir(path: 3),
        ]),
        // Not found by the suite: another client's move and delete of folders with files,
        // one of them written here and not yet uploaded, and a folder made here inside.
        ("folders moved and deleted elsewhere", [
            .mkdir(path: 3),  // d
            .open(path: 4, mode: Step.OpenMode.all[3]),  // d/a, RDWR|CREAT
            .write(slot: 0, offset: 0, length: 7000, fill: 9),
            .close(slot: 0),
            .mkdir(path: 8),  // d/e
            .remoteRename(from: 3, to: 6),  // d → e
            .list(path: 6),
            .stat(path: 3),
            .open(path: 6, mode: Step.OpenMode.all[0]),  // e: RDONLY of a folder
            .mkdir(path: 3),  // d again
            .rename(from: 6, to: 5),  // e → d/b
            .remoteDelete(path: 3),
            .list(path: -1),
        ]),
        // Core seed 15715743439190257008: a time set through the path of an uploaded file,
        // then the file unlinked: fstat of a descriptor still open on it showed the time the
        // descriptor's own copy of the file had (its done local version's), not the one set.
        ("fstat after a time was set on an uploaded file and its name removed", [
            .open(path: 6, mode: Step.OpenMode.all[5]),  // e, RDWR|CREAT|TRUNC
            .open(path: 3, mode: Step.OpenMode.all[7]),  // d, RDWR|CREAT|EXCL
            .open(path: 0, mode: Step.OpenMode.all[7]),  // a, RDWR|CREAT|EXCL
            .fdatasync(slot: 0),
            .touch(path: 6, seconds: 946_877_937, nanos: 246_377_420),
            .unlink(path: 6),
            .fstat(slot: 3),
        ]),
        // Mount seed 14932194666217369875: a new folder sent before a kill -9, made on
        // Dropbox but not heard of; the next mount, offline, took it back on rmdir without
        // a request, and it came back once Dropbox was in reach. Depends on timing (the
        // folder must be sent before the crash); NewFolderTests pins the cause.
        ("rmdir of a new folder that may have been made before a crash", [
            .mkdir(path: 1),  // b
            .open(path: 2, mode: Step.OpenMode.all[6]),  // c, WRONLY|CREAT|APPEND
            .crash,
            .network(up: false, silent: true),
            .crash,
            .rmdir(path: 1),
        ]),
        // Found by hand (`cp -a` of a tree, then `drop_caches`): a folder's time set before
        // its mkdir reached Dropbox was dropped when the kernel forgot the folder (no id to
        // keep it by): the folder showed the mount's start. Forgotten again after a rename and
        // after it reached Dropbox, it keeps that time.
        ("a folder's time set before its mkdir was sent, through forgets and a rename", [
            .network(up: false),
            .mkdir(path: 3),  // d
            .touch(path: 3, seconds: 946_700_000, nanos: 123),
            .forget,
            .stat(path: 3),
            .rename(from: 3, to: 6),  // d → e
            .forget,
            .stat(path: 6),
            .network(up: true),
            .settle,
            .forget,
            .stat(path: 6),
        ]),
        // Core seed 5860729189645261790: fstat of a descriptor open on a file whose mode was
        // set and whose name was then removed showed the default mode, not the one set.
        ("fstat of a file with a mode set, after its name was removed", [
            .open(path: 1, mode: Step.OpenMode.all[7]),  // b, RDWR|CREAT|EXCL
            .chmod(path: 1, mode: 0o4755),
            .unlink(path: 1),
            .fstat(slot: 0),
        ]),
        // Core seed 805724870378030322: a file replaced by a rename, still open, showed the
        // mode of the file that took its name.
        ("fstat of a file replaced by a rename of a file with a mode set", [
            .open(path: 3, mode: Step.OpenMode.all[3]),  // d, RDWR|CREAT
            .chmod(path: 3, mode: 0o600),
            .open(path: 2, mode: Step.OpenMode.all[7]),  // c, RDWR|CREAT|EXCL
            .rename(from: 3, to: 0),  // d → a
            .rename(from: 0, to: 2),  // a → c
            .fstat(slot: 1),
        ]),
        // Core seed 2637417632024770726: fallocate(KEEP_SIZE) changed no byte and left a
        // time set before; on a local disk every fallocate advances mtime.
        ("fallocate keeping the size after a time was set", [
            .open(path: 2, mode: Step.OpenMode.all[4]),  // c, WRONLY|CREAT|TRUNC
            .touch(path: 2, seconds: 946_728_741, nanos: 0),
            .fallocate(slot: 0, mode: 0x01, offset: 4_195_751, length: 2_936),
            .fstat(slot: 0),
            .close(slot: 0),
            .stat(path: 2),
        ]),
        // Core seed 17004169920917819249: open(O_TRUNC) of a file already empty, open with a
        // time set and fsynced, left that time; on a local disk O_TRUNC advances mtime
        // whatever the size.
        ("O_TRUNC of an empty file with a time set, open and fsynced", [
            .open(path: 2, mode: Step.OpenMode.all[3]),  // c, RDWR|CREAT
            .touch(path: 2, seconds: 947_587_566, nanos: 0),
            .fsync(slot: 1),
            .open(path: 2, mode: Step.OpenMode.all[5]),  // c, RDWR|CREAT|TRUNC
            .settle,
            .fstat(slot: 1),
        ]),
        // Core seed 16986262181336623723: the same after the file reached Dropbox and was
        // given a time there (kept here for its revision): the upload of the same bytes gives
        // that revision back, and the time set before stayed.
        ("O_TRUNC of an empty file given a time after its upload", [
            .open(path: 0, mode: Step.OpenMode.all[7]),  // a, RDWR|CREAT|EXCL
            .settle,
            .touch(path: 0, seconds: 947_062_847, nanos: 0),
            .open(path: 0, mode: Step.OpenMode.all[4]),  // a, WRONLY|CREAT|TRUNC
            .settle,
            .fstat(slot: 2),
        ]),
        // Core seed 1379951062731978218: a file on Dropbox, open twice; a time set on it, then
        // the descriptor opened for writing closed unchanged: the other one's fstat lost the time.
        ("a time set, then a descriptor closed unchanged", [
            .open(path: 3, mode: Step.OpenMode.all[7]),  // d, RDWR|CREAT|EXCL
            .settle,
            .open(path: 3, mode: Step.OpenMode.all[3]),  // d, RDWR|CREAT
            .touch(path: 3, seconds: 947_488_285, nanos: 646_224_297),
            .close(slot: 1),
            .fstat(slot: 2),
        ]),
        // Core seed 17777277042488131502: a folder given a mode, open, then deleted by another
        // client: fstat of the open descriptor showed the default mode (the removal dropped
        // the kept mode, and nothing kept it for the inode, as an rmdir here does).
        ("fstat of an open folder with a mode, deleted elsewhere", [
            .mkdir(path: 2),  // c
            .chmod(path: 2, mode: 0o640),
            .open(path: 2, mode: Step.OpenMode.all[0]),  // c, RDONLY
            .remoteDelete(path: 2),
            .fstat(slot: 1),
        ]),
        // Mount, DROPBOXFS_DIFF_MIX=tree with outages, seed 16970507961538690559 (shrunk by the
        // checker): a round of new folders failed as the outage began (so Dropbox may have made
        // them), the rename of one into another was then kept as a move instead of making it at
        // its new name, and after the inner one's removal the outer one's rmdir had to send
        // them all first: ENETUNREACH, where a disk's rmdir succeeds. (Only the mount runs the
        // senders in the background: the core passed it before the fix too.)
        ("an rmdir in an outage of a new folder another was renamed into and removed from", [
            .network(up: false),
            .mkdir(path: 3),  // d
            .mkdir(path: 1),  // b
            .mkdir(path: 4),  // d/a
            .rename(from: 1, to: 6),  // b → e
            .settle,
            .rename(from: 4, to: 7),  // d/a → e/f
            .rmdir(path: 7),  // e/f
            .rmdir(path: 6),  // e
        ]),
        // Core, the many-files mix, seed 7804464779240120298: a folder held open and deleted by
        // another client, listed through its descriptor: ENOENT, where a disk lists nothing.
        // Only the mount's kernel notices detached the inode of a folder removed elsewhere;
        // the core, without them, still took the inode for its old path.
        ("a listing through an open folder deleted elsewhere", [
            .burst(path: 7, count: 3, size: 189, fill: 172),  // e/f
            .open(path: 7, mode: Step.OpenMode.all[0]),  // e/f, RDONLY
            .remoteDelete(path: 7),
            .listOpen(slot: 0),
        ]),
        // Not found by the suite (by hand, then `tail -F`): another client's shorter revision of
        // a file a descriptor reads here. The kernel's size of the file became the new one's:
        // the descriptor read the old revision cut there, and fstat said the new size.
        ("a descriptor reading a file another client rewrites shorter", [
            .open(path: 0, mode: Step.OpenMode.all[3]),  // a, RDWR|CREAT
            .write(slot: 0, offset: 0, length: 20000, fill: 1),
            .close(slot: 0),
            .open(path: 0, mode: Step.OpenMode.all[0]),  // a, RDONLY
            .read(slot: 0, offset: 0, length: 100),
            .remoteWriteOpen(slot: 0, length: 5000, fill: 2),
            .fstat(slot: 0),
            .read(slot: 0, offset: 0, length: 30000),
            .stat(path: 0),
            .read(slot: 0, offset: 10000, length: 30000),
            .close(slot: 0),
        ]),
    ]
}
