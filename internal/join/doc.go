// Package join turns the cluster's join secret into a node identity, and
// keeps that identity fresh.
//
// It owns both ends of the exchange: the server's handlers under PathPrefix
// (mounted outside authentication, because a joining agent has no
// credentials yet), the agent's client (Ensure, RequestToken, Identity and
// its renewal), NodeTokens, the authenticator for the node bearer tokens
// the server hands out for simulated nodes, the join token format and the
// takeover check. It does not register nodes, authorise requests, or touch
// the API or storage itself: certificates are signed by package pki, and
// the tokens, the issued identities and the Nodes and Leases are reached
// through small interfaces (TokenStore, IdentityStore, NodeReader) that
// package joinstate implements over etcd and client-go.
//
// # Join tokens
//
// A join token is the server's node-token file (never expires; rotated by
// replacing the file) or a token of the form <id>.<secret>, 6 and 16
// characters of [a-z0-9], made by `nodeplane token create` with an expiry.
// The server stores only a hash of the secret part, and the cluster-info
// MAC computed with the whole token when it was made. The id is public:
// the agent sends it with its cluster-info request (tokenID) so that the
// server answers with that token's MAC. An expired token is refused with
// "join token expired" (ErrTokenExpired, which also matches
// ErrTokenRejected); a deleted or unknown one like a wrong one.
//
// # Takeover
//
// A join for a node that has a live identity (its Node exists, its Lease
// was renewed within its duration and the certificate last issued to it is
// valid) is refused with 409 unless the joining key is that certificate's
// key: a leaked join secret cannot take over a running node. The
// administrator deletes the Node to hand its name to a new machine. The
// server records the key of each certificate it issues or renews.
//
// # Protocol
//
// The agent knows the server URL and the join secret (the server's
// node-token file) but not the cluster CA, so it cannot verify the server
// at first. The exchange is built so that the secret never crosses a
// connection the agent has not verified:
//
//  1. GET  /nodeplane/join/v1/cluster-info?nodeName=<n>[&tokenID=<id>], over TLS WITHOUT
//     verifying the server, sending no secret. The answer is the CA
//     certificate (PEM) and caMAC = HMAC-SHA256(key = secret,
//     "nodeplane-cluster-info-v1\n" || CA PEM). The agent recomputes the MAC
//     with its secret and compares in constant time. Only the holder of the
//     secret can produce a matching MAC, so a match proves the CA came from
//     the real server; a mismatch (wrong secret, or somebody in between)
//     stops the join before anything else is sent. The domain-separation
//     prefix keeps the MAC from being useful for anything else. Like
//     kubeadm's signed cluster-info, the MAC lets an eavesdropper guess the
//     secret offline, which is hopeless for the generated 256-bit secret
//     but not for a weak hand-written one: keep the generated one.
//  2. From here on the agent pins that CA (and checks the server's name as
//     usual). POST /nodeplane/join/v1/certificate with {token, nodeName,
//     csr}: the server checks the secret in constant time and signs a
//     client certificate CN=system:node:<nodeName>, O=system:nodes for the
//     CSR's public key, whatever subject the CSR asks for. The private key
//     is made on the agent and never leaves it.
//  3. POST /nodeplane/join/v1/renew with {csr}, authenticated by the node's
//     current client certificate (mutual TLS), returns a fresh certificate
//     for the same node name. No secret is needed, so an agent keeps its
//     identity even after the operator rotates the join secret.
//  4. POST /nodeplane/join/v1/token with {token, nodeName} returns a signed
//     node bearer token instead of a certificate, for `nodeplane sim`,
//     which multiplexes thousands of simulated nodes over a few HTTP/2
//     connections (a client certificate binds a connection to one
//     identity). Format: "npn1." || base64url(payload) || "." ||
//     base64url(HMAC-SHA256(signing key, "npn1." || base64url(payload))),
//     where the payload is JSON {"node": name, "exp": unix seconds} and the
//     signing key is pki's node-token-signing.key, not the join secret.
//     NodeTokens verifies them on every API request.
//
// # Agent side
//
// Ensure loads the identity from <data dir>/pki or joins; Identity.RESTConfig
// gives client-go a transport that pins the CA and presents the current
// certificate; Identity.RunRenewal renews it at 70–90% of its lifetime and
// re-joins with the token if it has expired. TokenClient (and RequestToken
// for one node) gets node bearer tokens for the simulator.
//
// Errors are metav1.Status bodies: a wrong secret is 401 "join token
// rejected" (the secret is never echoed or logged), a node name that is not
// a DNS subdomain is 422 Invalid naming nodeName, an unusable CSR is 400
// naming csr.
package join
