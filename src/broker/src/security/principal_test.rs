//! Tests of `principal`.

use super::*;

/// A self-signed certificate whose subject is
/// `/C=GB/O=Example, Inc./OU=eng/CN=alice/emailAddress=a@example.com`.
const CERT: &str = "\
-----BEGIN CERTIFICATE-----\n\
MIICGDCCAb+gAwIBAgIUSOYStlvSwI36JKmbN/B9yGKUy1QwCgYIKoZIzj0EAwIw\n\
YTELMAkGA1UEBhMCR0IxFjAUBgNVBAoMDUV4YW1wbGUsIEluYy4xDDAKBgNVBAsM\n\
A2VuZzEOMAwGA1UEAwwFYWxpY2UxHDAaBgkqhkiG9w0BCQEWDWFAZXhhbXBsZS5j\n\
b20wIBcNMjYxMTI3MjMwMjQ4WhgPMjEyNjExMDMyMzAyNDhaMGExCzAJBgNVBAYT\n\
AkdCMRYwFAYDVQQKDA1FeGFtcGxlLCBJbmMuMQwwCgYDVQQLDANlbmcxDjAMBgNV\n\
BAMMBWFsaWNlMRwwGgYJKoZIhvcNAQkBFg1hQGV4YW1wbGUuY29tMFkwEwYHKoZI\n\
zj0CAQYIKoZIzj0DAQcDQgAEGqmnft29vUO7CmwCZzhAtwIEMEimwiQnvbQcelCG\n\
szgNRUZRn4FgyYx3lpG5Vr6vmlnbfia/AlNLc2z+p8b5/KNTMFEwHQYDVR0OBBYE\n\
FL5TaYNcBBHDT5DC2+70Zl6RfDhAMB8GA1UdIwQYMBaAFL5TaYNcBBHDT5DC2+70\n\
Zl6RfDhAMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDRwAwRAIgXPliMpOV\n\
M51YBWcZrFTJJcPWzkm0+fevcW23B5rqKJsCIEjeBPb5Ttbbqq3pTDt43KirFynC\n\
NHV9dDxJnBuVW85o\n\
-----END CERTIFICATE-----\n\
";

fn der(pem: &str) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap().to_vec()
}

#[test]
fn the_subject_reads_as_javas_rfc_2253_name() {
    // Most specific first, a comma escaped, an attribute without a keyword as its OID
    // and DER in hex: what X500Principal.getName() gives, and so Kafka's principal.
    assert_eq!(
        subject(&der(CERT)).as_deref(),
        Some("1.2.840.113549.1.9.1=#160d61406578616d706c652e636f6d,CN=alice,OU=eng,O=Example\\, Inc.,C=GB")
    );
    let certs = [rustls::pki_types::CertificateDer::from(der(CERT))];
    let default = PrincipalMapper::parse("DEFAULT").unwrap();
    assert!(default.principal(Some(&certs)).unwrap().starts_with("User:1.2.840.113549.1.9.1=#"));
    assert_eq!(default.principal(None).as_deref(), Ok(ANONYMOUS));
    let cn = PrincipalMapper::parse("RULE:^.*CN=([a-z]+),.*$/$1/U").unwrap();
    assert_eq!(cn.principal(Some(&certs)).as_deref(), Ok("User:ALICE"));
    let none = PrincipalMapper::parse("RULE:^CN=x$/x/").unwrap();
    assert!(none.principal(Some(&certs)).unwrap_err().ends_with("C=GB"));
    assert_eq!(subject(b"not a certificate"), None);
}

#[test]
fn special_characters_are_escaped() {
    assert_eq!(escape("a,b+c\"d\\e<f>g;h"), "a\\,b\\+c\\\"d\\\\e\\<f\\>g\\;h");
    assert_eq!(escape("#lead"), "\\#lead");
    assert_eq!(escape(" both "), "\\ both\\ ");
}

#[test]
fn mapping_rules_apply_in_order_as_kafkas_do() {
    let m = PrincipalMapper::parse(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, \
         RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT",
    )
    .unwrap();
    assert_eq!(m.map("CN=kafka-1,OU=ServiceUsers,O=Org,C=US").as_deref(), Some("kafka-1"));
    assert_eq!(
        m.map("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Palo Alto,ST=CA,C=US").as_deref(),
        Some("duke@javasoft")
    );
    assert_eq!(m.map("OU=x,cn=svc.a,O=y").as_deref(), Some("SVC.A"));
    assert_eq!(m.map("O=only").as_deref(), Some("O=only"));
    // Without DEFAULT a subject no rule applies to has no principal.
    let strict = PrincipalMapper::parse("RULE:^CN=([a-z]+)$/$1x/").unwrap();
    assert_eq!(strict.map("CN=abc").as_deref(), Some("abcx"));
    assert_eq!(strict.map("CN=ABC"), None);
    assert_eq!(PrincipalMapper::parse("").unwrap().map("CN=a").as_deref(), Some("CN=a"));
    for bad in ["RULE:a", "RULE:(/x/", "NOPE", "DEFAULT DEFAULT"] {
        assert!(PrincipalMapper::parse(bad).is_err(), "{bad}");
    }
}
