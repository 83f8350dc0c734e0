import CouchReplication
import Testing

/// OAuth 1.0a signing checked against the worked examples of RFC 5849.
@Suite struct OAuthSignerTests {
    /// Section 1.2: the printer's three signed requests.
    @Test func signaturesOfSection1Point2() {
        let consumerSecret = "kd94hf93k423kf44"
        // Temporary credentials request.
        var base = OAuthSigner.signatureBaseString(method: "POST", url: "https://photos.example.net/initiate", parameters: [
            ("oauth_consumer_key", "dpf43f3p2l4k3l03"), ("oauth_signature_method", "HMAC-SHA1"),
            ("oauth_timestamp", "137131200"), ("oauth_nonce", "wIjqoS"),
            ("oauth_callback", "http://printer.example.com/ready"),
        ])
        #expect(OAuthSigner.hmacSHA1Signature(base, consumerSecret: consumerSecret, tokenSecret: "") == "74KNZJeDHnMBp0EMJ9ZHt/XKycU=")
        // Token request.
        base = OAuthSigner.signatureBaseString(method: "POST", url: "https://photos.example.net/token", parameters: [
            ("oauth_consumer_key", "dpf43f3p2l4k3l03"), ("oauth_token", "hh5s93j4hdidpola"),
            ("oauth_signature_method", "HMAC-SHA1"), ("oauth_timestamp", "137131201"), ("oauth_nonce", "walatlh"),
            ("oauth_verifier", "hfdp7dh39dks9884"),
        ])
        #expect(OAuthSigner.hmacSHA1Signature(base, consumerSecret: consumerSecret, tokenSecret: "hdhd0244k9j7ao03")
                == "gKgrFCywp7rO0OXSjdot/IHF7IU=")
    }

    /// Section 1.2's protected resource request, signed end to end with the header a replicator sends.
    @Test func authorizationHeaderForTheProtectedResource() {
        let signer = OAuthSigner(credentials: OAuthCredentials(
            consumerKey: "dpf43f3p2l4k3l03", consumerSecret: "kd94hf93k423kf44",
            token: "nnch734d00sl2jdk", tokenSecret: "pfkkdhi9sl3r4s00"))
        let header = signer.authorization(method: "GET", url: "http://photos.example.net/photos?file=vacation.jpg&size=original",
                                          nonce: "chapoH", timestamp: 137131202, realm: "Photos")
        #expect(header == #"OAuth realm="Photos", oauth_consumer_key="dpf43f3p2l4k3l03", oauth_token="nnch734d00sl2jdk", oauth_signature_method="HMAC-SHA1", oauth_timestamp="137131202", oauth_nonce="chapoH", oauth_signature="MdpQcU8iPSUjWoN%2FUDMsK2sui9I%3D""#)
    }

    /// Section 3.4.1.1: the signature base string of a request with query, body and
    /// protocol parameters (3.4.1.3.1 shows their decoding, 3.4.1.3.2 their normalisation).
    @Test func signatureBaseStringOfSection3Point4Point1() {
        let url = "http://example.com/request?b5=%3D%253D&a3=a&c%40=&a2=r%20b"
        let parameters = OAuthSigner.queryParameters(of: url) + OAuthSigner.formParameters("c2&a3=2+q") + [
            ("oauth_consumer_key", "9djdj82h48djs9d2"), ("oauth_token", "kkk9d7dh3k39sjv7"),
            ("oauth_signature_method", "HMAC-SHA1"), ("oauth_timestamp", "137131201"), ("oauth_nonce", "7d8f3e4a"),
        ]
        #expect(OAuthSigner.normalizedParameters(parameters)
                == "a2=r%20b&a3=2%20q&a3=a&b5=%3D%253D&c%40=&c2=&oauth_consumer_key=9djdj82h48djs9d2&oauth_nonce=7d8f3e4a&oauth_signature_method=HMAC-SHA1&oauth_timestamp=137131201&oauth_token=kkk9d7dh3k39sjv7")
        #expect(OAuthSigner.signatureBaseString(method: "POST", url: url, parameters: parameters) ==
            "POST&http%3A%2F%2Fexample.com%2Frequest&a2%3Dr%2520b%26a3%3D2%2520q%26a3%3Da%26b5%3D%253D%25253D%26c%2540%3D%26c2%3D%26oauth_consumer_key%3D9djdj82h48djs9d2%26oauth_nonce%3D7d8f3e4a%26oauth_signature_method%3DHMAC-SHA1%26oauth_timestamp%3D137131201%26oauth_token%3Dkkk9d7dh3k39sjv7")
    }

    /// Section 3.4.1.2: the base string URI.
    @Test func baseStringURIs() {
        #expect(OAuthSigner.baseStringURI("HTTP://EXAMPLE.COM:80/r%20v/X?id=123") == "http://example.com/r%20v/X")
        #expect(OAuthSigner.baseStringURI("https://www.example.net:8080/?q=1") == "https://www.example.net:8080/")
        #expect(OAuthSigner.baseStringURI("https://example.net:443") == "https://example.net/")
    }
}
