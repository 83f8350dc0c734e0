import CouchCore
import CurlClient
import Foundation

/// A revision with attachment bodies as the `multipart/related` request body CouchDB's
/// replicator sends with `PUT /db/doc?new_edits=false`: the document's JSON (attachments
/// that follow marked so), then one part per body in the order the JSON names them, each
/// with `Content-Disposition: attachment; filename="name"`, `Content-Type`,
/// `Content-Length` and, for a compressed body, `Content-Encoding`. Bodies in files are
/// read while the request is sent, never loaded whole.
enum MultipartRelatedBody {
    static func make(_ attached: AttachedRevision) -> (contentType: String, body: UploadBody) {
        let boundary = Digest.randomHex(bytes: 16)
        var body = UploadBody()
        body.append("--\(boundary)\r\nContent-Type: application/json\r\n\r\n")
        body.append(attached.revision.json)
        for attachment in attached.bodies {
            var head = "\r\n--\(boundary)\r\nContent-Disposition: attachment; filename=\"\(dispositionName(attachment.name))\""
                + "\r\nContent-Type: \(attachment.contentType)\r\nContent-Length: \(attachment.length)"
            if let encoding = attachment.encoding { head += "\r\nContent-Encoding: \(encoding)" }
            body.append(head + "\r\n\r\n")
            switch attachment.content {
            case .bytes(let bytes): body.append(bytes)
            case .file(let path): body.appendFile(path: path, length: attachment.length)
            case .spooled(let file): body.appendFile(path: file.path, length: attachment.length)
            case .blob(let blob): body.appendFile(path: blob.path, length: attachment.length)
            }
        }
        body.append("\r\n--\(boundary)--")
        return ("multipart/related; boundary=\"\(boundary)\"", body)
    }

    /// A name as it goes between the quotes of `filename="..."`: as it is (CouchDB writes it
    /// so, and matches parts by their order anyway), percent-encoded when it holds a quote,
    /// a backslash, a `%`, a control or non-ASCII character (Couchette decodes it).
    static func dispositionName(_ name: String) -> String {
        let plain = name.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7f && $0 != UInt8(ascii: "\"")
            && $0 != UInt8(ascii: "\\") && $0 != UInt8(ascii: "%") }
        return plain ? name : URLEncoding.component(name)
    }

    /// `attachment; filename="name"` → `name` (backslash escapes undone); nil without one.
    static func filename(fromContentDisposition header: String?) -> String? {
        guard let header, let range = header.range(of: "filename=") else { return nil }
        var rest = header[range.upperBound...].drop { $0 == " " }
        guard rest.first == "\"" else {
            return String(rest.prefix { $0 != ";" }).trimmingCharacters(in: .whitespaces)
        }
        rest = rest.dropFirst()
        var name = ""
        var escaped = false
        for character in rest {
            if escaped {
                name.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "\"" {
                break
            } else {
                name.append(character)
            }
        }
        return name
    }
}
