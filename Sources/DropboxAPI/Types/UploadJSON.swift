/// The upload routes' arguments and answers coded by hand. An fsync of 1,000 new small files
/// makes 1,000 `upload_session/start` calls and one `finish_batch_v2` of 1,000 entries; with
/// Foundation's coders the batch's argument took 9 ms to encode and its answer 9-10 ms to
/// decode, one after the other on the fsync's path, and each start a coder of each kind.
/// `UploadJSONTests` holds these to what Foundation writes and reads.

/// An argument with a hand encoder, which `APIJSON.encode` uses instead of `JSONEncoder`.
protocol HandEncodedJSON {
    func write(to json: inout JSONWriter)
}

extension WriteMode: HandEncodedJSON {
    func write(to json: inout JSONWriter) {
        switch self {
        case .add: json.raw(#"{".tag":"add"}"#)
        case .overwrite: json.raw(#"{".tag":"overwrite"}"#)
        case .update(let rev):
            json.raw(#"{".tag":"update","update":"#)
            json.string(rev)
            json.raw("}")
        }
    }
}

extension CommitInfo: HandEncodedJSON {
    func write(to json: inout JSONWriter) {
        json.raw(#"{"path":"#)
        json.string(path)
        json.raw(#","mode":"#)
        mode.write(to: &json)
        json.raw(#","autorename":"#)
        json.bool(autorename)
        if let clientModified {
            json.raw(#","client_modified":"#)
            json.string(clientModified)
        }
        json.raw(#","mute":"#)
        json.bool(mute)
        json.raw(#","strict_conflict":"#)
        json.bool(strictConflict)
        json.raw("}")
    }
}

extension UploadSessionCursor: HandEncodedJSON {
    func write(to json: inout JSONWriter) {
        json.raw(#"{"session_id":"#)
        json.string(sessionId)
        json.raw(#","offset":"#)
        json.integer(offset)
        json.raw("}")
    }
}

extension UploadSessionFinishArgument: HandEncodedJSON {
    func write(to json: inout JSONWriter) {
        json.raw(#"{"cursor":"#)
        cursor.write(to: &json)
        json.raw(#","commit":"#)
        commit.write(to: &json)
        if let contentHash {
            json.raw(#","content_hash":"#)
            json.string(contentHash)
        }
        json.raw("}")
    }
}

extension UploadSessionFinishBatchArgument: HandEncodedJSON {
    func write(to json: inout JSONWriter) {
        json.raw(#"{"entries":["#)
        for (index, entry) in entries.enumerated() {
            if index > 0 { json.raw(",") }
            entry.write(to: &json)
        }
        json.raw("]}")
    }
}

extension UploadSessionStartArgument: HandEncodedJSON {
    func write(to json: inout JSONWriter) {
        json.raw(#"{"close":"#)
        json.bool(close)
        if let sessionType {
            json.raw(#","session_type":{".tag":"#)
            json.string(sessionType.rawValue)
            json.raw("}")
        }
        if let contentHash {
            json.raw(#","content_hash":"#)
            json.string(contentHash)
        }
        json.raw("}")
    }
}

/// An answer with a hand decoder, which `DropboxClient` tries before `JSONDecoder`: nil
/// leaves the answer to `JSONDecoder` (which also says what is wrong with one that is).
protocol HandDecodedJSON {
    init?(handDecoding bytes: [UInt8])
}

extension UploadSessionFinishBatchResult: HandDecodedJSON {
    /// The usual answer, every entry a success (a file, checked as a listing's are); an
    /// answer with a failed entry goes to `JSONDecoder`, which reads every failure's kind.
    init?(handDecoding bytes: [UInt8]) {
        var files: [UploadSessionFinishBatchResultEntry]?
        do {
            try JSONScanner.scan(bytes) { scanner in
                try scanner.object { key, scanner in
                    guard key == "entries" else { return try scanner.skipValue() }
                    var list: [UploadSessionFinishBatchResultEntry] = []
                    try scanner.array { scanner in
                        guard case .file(let file) = try Metadata(scanning: &scanner, fileTag: "success") else {
                            throw JSONScanner.failure("not a success")
                        }
                        list.append(.success(file))
                    }
                    files = list
                }
            }
        } catch {
            return nil
        }
        guard let files else { return nil }
        self.init(entries: files)
    }
}

extension UploadSessionStartResult: HandDecodedJSON {
    init?(handDecoding bytes: [UInt8]) {
        var session: String?
        do {
            try JSONScanner.scan(bytes) { scanner in
                try scanner.object { key, scanner in
                    if key == "session_id" { session = try scanner.string() } else { try scanner.skipValue() }
                }
            }
        } catch {
            return nil
        }
        guard let session else { return nil }
        self.init(sessionId: session)
    }
}
