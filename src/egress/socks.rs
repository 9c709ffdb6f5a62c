//! The server side of SOCKS5 CONNECT without authentication (RFC 1928): what Chromium speaks
//! to a `socks5://` proxy. Chromium sends host names, never addresses it resolved, so the
//! proxy decides where a name leads.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const VERSION: u8 = 5;
const NO_AUTHENTICATION: u8 = 0;
const NO_ACCEPTABLE_METHOD: u8 = 0xff;
const CONNECT: u8 = 1;
const IPV4: u8 = 1;
const DOMAIN: u8 = 3;
const IPV6: u8 = 4;

/// Where the client asks to be connected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// A host name, or an IP literal (IPv6 in brackets).
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// The reply codes this proxy sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Reply {
    Succeeded = 0,
    NotAllowed = 2,
    HostUnreachable = 4,
    ConnectionRefused = 5,
    CommandNotSupported = 7,
    AddressNotSupported = 8,
}

/// Reads the greeting and the request. `Ok(Err(reply))` is a request this proxy cannot serve:
/// answer it with `reply` and close.
pub async fn read_request<S>(stream: &mut S) -> io::Result<Result<Destination, Reply>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let [version, methods] = read_array(stream).await?;
    if version != VERSION {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "not SOCKS5"));
    }
    let mut offered = vec![0; usize::from(methods)];
    stream.read_exact(&mut offered).await?;
    if !offered.contains(&NO_AUTHENTICATION) {
        stream.write_all(&[VERSION, NO_ACCEPTABLE_METHOD]).await?;
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the client needs authentication",
        ));
    }
    stream.write_all(&[VERSION, NO_AUTHENTICATION]).await?;
    let [_version, command, _reserved, kind] = read_array(stream).await?;
    let host = match kind {
        IPV4 => std::net::Ipv4Addr::from(read_array::<_, 4>(stream).await?).to_string(),
        IPV6 => format!(
            "[{}]",
            std::net::Ipv6Addr::from(read_array::<_, 16>(stream).await?)
        ),
        DOMAIN => {
            let [length] = read_array(stream).await?;
            let mut name = vec![0; usize::from(length)];
            stream.read_exact(&mut name).await?;
            match String::from_utf8(name) {
                // An IPv6 literal sent as a name: written as URLs write it, like the others.
                Ok(name) if name.parse::<std::net::Ipv6Addr>().is_ok() => format!("[{name}]"),
                Ok(name) => name,
                Err(_) => return Ok(Err(Reply::AddressNotSupported)),
            }
        }
        _ => return Ok(Err(Reply::AddressNotSupported)),
    };
    let port = u16::from_be_bytes(read_array(stream).await?);
    if command != CONNECT {
        return Ok(Err(Reply::CommandNotSupported));
    }
    Ok(Ok(Destination { host, port }))
}

/// Answers the request. The bound address is not meaningful to Chromium: zeros.
pub async fn reply<S: AsyncWrite + Unpin>(stream: &mut S, reply: Reply) -> io::Result<()> {
    stream
        .write_all(&[VERSION, reply as u8, 0, IPV4, 0, 0, 0, 0, 0, 0])
        .await?;
    stream.flush().await
}

async fn read_array<S: AsyncRead + Unpin, const N: usize>(stream: &mut S) -> io::Result<[u8; N]> {
    let mut bytes = [0; N];
    stream.read_exact(&mut bytes).await?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn parse(bytes: &[u8]) -> (io::Result<Result<Destination, Reply>>, Vec<u8>) {
        let (mut client, mut server) = tokio::io::duplex(1024);
        client.write_all(bytes).await.unwrap();
        let request = read_request(&mut server).await;
        drop(server);
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).await.unwrap();
        (request, answer)
    }

    #[tokio::test]
    async fn names_and_both_address_kinds_are_read() {
        let mut by_name = vec![5, 1, 0, 5, 1, 0, 3, 11];
        by_name.extend_from_slice(b"example.org");
        by_name.extend_from_slice(&443u16.to_be_bytes());
        let (request, answer) = parse(&by_name).await;
        let expected = Destination {
            host: "example.org".into(),
            port: 443,
        };
        assert_eq!(request.unwrap().unwrap(), expected);
        assert_eq!(answer, [5, 0]);
        let (v4, _) = parse(&[5, 1, 0, 5, 1, 0, 1, 169, 254, 169, 254, 0, 80]).await;
        assert_eq!(v4.unwrap().unwrap().to_string(), "169.254.169.254:80");
        let mut v6 = vec![5, 1, 0, 5, 1, 0, 4];
        v6.extend_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
        v6.extend_from_slice(&[0, 80]);
        assert_eq!(parse(&v6).await.0.unwrap().unwrap().host, "[::1]");
    }

    #[tokio::test]
    async fn other_commands_and_authentication_are_refused() {
        let (bind, _) = parse(&[5, 1, 0, 5, 2, 0, 1, 1, 2, 3, 4, 0, 80]).await;
        assert_eq!(bind.unwrap().unwrap_err(), Reply::CommandNotSupported);
        let (password_only, answer) = parse(&[5, 1, 2]).await;
        assert!(password_only.is_err());
        assert_eq!(answer, [5, 0xff]);
        assert!(parse(&[4, 1, 0, 80]).await.0.is_err());
    }
}
