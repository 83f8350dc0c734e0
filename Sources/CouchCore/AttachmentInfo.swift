/// An attachment of a stored revision: CouchDB's metadata plus the key of its bytes in
/// the database's blob store.
public struct AttachmentInfo: Sendable, Equatable {
    public var name: String
    public var contentType: String
    /// Length of the data as clients see it.
    public var length: Int
    /// `md5-<base64>` of the stored bytes, as CouchDB computes it.
    public var digest: String
    public var revpos: Int
    /// `gzip` when stored compressed; the stored length is then `encodedLength`.
    public var encoding: String?
    public var encodedLength: Int?
    /// The blob's file name in the attachment store (hex SHA-256 of the stored bytes);
    /// empty when the body is absent (see `isBodyAbsent`).
    public var blobKey: String

    public init(name: String, contentType: String, length: Int, digest: String, revpos: Int,
                encoding: String? = nil, encodedLength: Int? = nil, blobKey: String) {
        self.name = name
        self.contentType = contentType
        self.length = length
        self.digest = digest
        self.revpos = revpos
        self.encoding = encoding
        self.encodedLength = encodedLength
        self.blobKey = blobKey
    }

    public var storedLength: Int { encodedLength ?? length }

    /// The metadata is known but the body was never stored here (a replication that left
    /// bodies to be fetched on demand); `Database.fillAbsentBody` stores it later.
    public var isBodyAbsent: Bool { blobKey.isEmpty }

    /// An attachment known by its metadata alone, its body absent.
    public static func absent(name: String, contentType: String, length: Int, digest: String, revpos: Int,
                              encoding: String? = nil, encodedLength: Int? = nil) -> AttachmentInfo {
        AttachmentInfo(name: name, contentType: contentType, length: length, digest: digest, revpos: revpos,
                       encoding: encoding, encodedLength: encodedLength, blobKey: "")
    }

    /// The error a reader answers for an absent body it cannot fetch.
    public func absentBodyError(documentID: String, detail: String? = nil) -> CouchError {
        CouchError(.attachmentNotDownloaded, "The body of attachment \(name) of \(documentID) was not downloaded"
                   + (detail.map { ": " + $0 } ?? " and no replication can fetch it"))
    }

    /// The 16 bytes of an `md5-` digest (what CouchDB hashes into revision IDs).
    public var md5: [UInt8]? {
        guard digest.hasPrefix("md5-"), let bytes = Base64.decode(String(digest.dropFirst(4))), bytes.count == 16 else { return nil }
        return bytes
    }

    /// `md5-<base64>`, CouchDB's digest notation.
    public static func digestString(md5: [UInt8]) -> String { "md5-" + Base64.encode(md5) }

    // MARK: Storage form: a JSON object of name → metadata, kept beside the body.

    public static func encode(_ attachments: [AttachmentInfo]) -> [UInt8] {
        var object = JSONObject()
        for attachment in attachments {
            var entry: JSONObject = [
                "content_type": JSONValue(attachment.contentType), "length": JSONValue(attachment.length),
                "digest": JSONValue(attachment.digest), "revpos": JSONValue(attachment.revpos),
                "blob": JSONValue(attachment.blobKey),
            ]
            if attachment.isBodyAbsent { entry["absent"] = true }
            if let encoding = attachment.encoding { entry["encoding"] = JSONValue(encoding) }
            if let encodedLength = attachment.encodedLength { entry["encoded_length"] = JSONValue(encodedLength) }
            object[attachment.name] = .object(entry)
        }
        return JSONValue.object(object).serialized()
    }

    public static func decode(_ bytes: [UInt8]) -> [AttachmentInfo] {
        guard !bytes.isEmpty, case .object(let object)? = try? JSONValue.parse(bytes) else { return [] }
        return object.compactMap { name, value in
            guard let contentType = value["content_type"]?.stringValue, let length = value["length"]?.intValue,
                  let digest = value["digest"]?.stringValue, let revpos = value["revpos"]?.intValue,
                  let blob = value["blob"]?.stringValue else { return nil }
            return AttachmentInfo(name: name, contentType: contentType, length: length, digest: digest, revpos: revpos,
                                  encoding: value["encoding"]?.stringValue, encodedLength: value["encoded_length"]?.intValue,
                                  blobKey: blob)
        }
    }
}
