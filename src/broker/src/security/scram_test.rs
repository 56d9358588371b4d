use super::*;

/// RFC 7677's example exchange, from the client's side.
#[test]
fn the_client_answers_rfc_7677s_example() {
    let (mut client, first) = ScramClient::start_with_nonce(
        ScramMechanism::Sha256,
        "user",
        "pencil",
        "rOprNGfwEbeRWgbNEkqO".into(),
    );
    assert_eq!(first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    let server_first =
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    let last = client.respond(server_first).expect("client-final");
    assert_eq!(
        String::from_utf8(last).unwrap(),
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    );
    client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=").expect("the RFC's server signature");
    assert!(client.verify(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=").is_err());
}

fn exchange(
    m: ScramMechanism,
    stored: &ScramCredential,
    user: &str,
    password: &str,
) -> Result<String, String> {
    let mut server = ScramServer::new(m);
    let (mut client, first) = ScramClient::start(m, user, password);
    let server_first = server.first(&first, |u| (u == "alice").then(|| stored.clone()))?;
    let last = client.respond(&server_first)?;
    let (server_final, who) = server.last(&last)?;
    client.verify(&server_final)?;
    Ok(who)
}

#[test]
fn a_user_with_the_right_password_is_authenticated_and_no_other() {
    for m in ScramMechanism::ALL {
        let stored = ScramCredential::from_password(m, "alice-secret", b"salty", 4096);
        assert_eq!(exchange(m, &stored, "alice", "alice-secret"), Ok("alice".to_string()));
        assert!(exchange(m, &stored, "alice", "alice-secreT").unwrap_err().contains("wrong password"));
        assert!(exchange(m, &stored, "bob", "alice-secret").unwrap_err().contains("no SCRAM"));
    }
}

#[test]
fn the_stored_form_is_kafkas_and_reads_back() {
    let c = ScramCredential::from_password(ScramMechanism::Sha512, "p", b"s", 8192);
    let text = c.to_kafka();
    assert!(text.starts_with("salt=cw==,stored_key="), "{text}");
    assert!(text.ends_with(",iterations=8192"), "{text}");
    assert_eq!(ScramCredential::from_kafka(&text), Some(c));
    assert_eq!(ScramCredential::from_kafka("salt=cw==,iterations=1"), None);
}

#[test]
fn names_with_commas_and_equals_signs_are_escaped_and_read_back() {
    let m = ScramMechanism::Sha256;
    let stored = ScramCredential::from_password(m, "pw", b"salt", 4096);
    let mut server = ScramServer::new(m);
    let (mut client, first) = ScramClient::start(m, "a,b=c", "pw");
    assert!(String::from_utf8_lossy(&first).contains("n=a=2Cb=3Dc,"));
    let server_first = server.first(&first, |u| (u == "a,b=c").then(|| stored.clone())).expect("first");
    let last = client.respond(&server_first).expect("final");
    assert_eq!(server.last(&last).expect("last").1, "a,b=c");
}

#[test]
fn a_tampered_exchange_is_refused() {
    let m = ScramMechanism::Sha256;
    let stored = ScramCredential::from_password(m, "pw", b"salt", 4096);
    let lookup = |_: &str| Some(stored.clone());
    // A nonce the server did not send.
    let mut server = ScramServer::new(m);
    let (mut client, first) = ScramClient::start(m, "u", "pw");
    let server_first = server.first(&first, lookup).unwrap();
    let last = String::from_utf8(client.respond(&server_first).unwrap()).unwrap();
    let forged = last.replacen(",r=", ",r=x", 1);
    assert!(server.last(forged.as_bytes()).is_err());
    // Channel binding asked for, a delegation token, garbage.
    for bad in [&b"p=tls-unique,,n=u,r=abc"[..], b"n,,n=u,r=abc,tokenauth=true", b"\xff", b"n,,r=abc"] {
        assert!(ScramServer::new(m).first(bad, lookup).is_err(), "{bad:?}");
    }
    // A final message before the first.
    assert!(ScramServer::new(m).last(b"c=biws,r=a,p=AAAA").is_err());
}
