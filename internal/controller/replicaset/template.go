package replicaset

import (
	"encoding/binary"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
)

// hashAlphabet spells template hashes: digits and consonants without
// vowels or look-alikes, so a hash is a valid label value and never a word.
const hashAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// hashLen digits of base 27 hold any 32-bit value (27^7 > 2^32).
const hashLen = 7

// TemplateHash is a short, stable name for a pod template: Deployments put
// it in the pod-template-hash label and their ReplicaSets' names,
// DaemonSets in the controller-revision-hash label. It is FNV-1a (32 bits)
// of the template's protobuf encoding — canonical: map keys sorted, nil and
// empty lists alike — followed by collisionCount when set, written as
// seven characters of hashAlphabet. Any change to the template changes it
// (up to FNV collisions, which collisionCount resolves); the same template
// gives the same hash in every process and release, unless a later
// k8s.io/api adds a field that encodes non-empty by default.
//
// Upstream hashes a spew dump of the Go value with the same FNV-1a; the
// hashes differ, so a ReplicaSet made by upstream's controller is not
// recognised by name — it is still found by comparing templates.
func TemplateHash(template *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	if b, err := template.Marshal(); err == nil {
		_, _ = h.Write(b)
	} else {
		// Unreachable for API types; hash something stable all the same.
		_, _ = h.Write([]byte(template.String()))
	}
	if collisionCount != nil {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(*collisionCount))
		_, _ = h.Write(b[:])
	}
	v := h.Sum32()
	out := make([]byte, hashLen)
	for i := range out {
		out[i] = hashAlphabet[v%uint32(len(hashAlphabet))]
		v /= uint32(len(hashAlphabet))
	}
	return string(out)
}
