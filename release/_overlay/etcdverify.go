// This file replaces go.etcd.io/etcd/server/v3/storage/backend's verify.go in
// nodeplane's release builds (see ../README.md and
// scripts/release-overlay.sh). It keeps that file's exported entry points
// and their behaviour under the ETCD_VERIFY environment variable, but
// compares the two transactions' views of a bucket without go-cmp, whose
// reporter looks methods up by name through reflection and so stops the Go
// linker from dropping unused methods.

package backend

import (
	"runtime/debug"
	"strings"

	"go.uber.org/zap"

	"go.etcd.io/etcd/client/pkg/v3/verify"
)

// EnvVerifyValueLock is the ETCD_VERIFY value that turns on the lock checks.
const EnvVerifyValueLock verify.VerificationType = "lock"

// ValidateCalledInsideApply panics, when lock checks are on, if the caller
// is not inside the apply loop.
func ValidateCalledInsideApply(lg *zap.Logger) {
	if lockChecks() && !stackHas(".applyEntries") {
		lg.Panic("Called outside of APPLY!", zap.Stack("stacktrace"))
	}
}

// ValidateCalledOutSideApply panics, when lock checks are on, if the caller
// is inside the apply loop.
func ValidateCalledOutSideApply(lg *zap.Logger) {
	if lockChecks() && stackHas(".applyEntries") {
		lg.Panic("Called inside of APPLY!", zap.Stack("stacktrace"))
	}
}

// ValidateCalledInsideUnittest stops the process, when lock checks are on,
// if the caller is not a unit test.
func ValidateCalledInsideUnittest(lg *zap.Logger) {
	if lockChecks() && !(stackHas("_test.go") && !stackHas("tests/")) {
		lg.Fatal("Lock called outside of unit test!", zap.Stack("stacktrace"))
	}
}

func lockChecks() bool { return verify.IsVerificationEnabled(EnvVerifyValueLock) }

func stackHas(s string) bool { return strings.Contains(string(debug.Stack()), s) }

// VerifyBackendConsistency checks, when ETCD_VERIFY asks for it, that the
// read and the write transaction see the same data in each bucket.
func VerifyBackendConsistency(b Backend, lg *zap.Logger, skipSafeRangeBucket bool, bucket ...Bucket) {
	verify.Verify("bucket data mismatch", func() (bool, map[string]any) {
		if b == nil {
			return true, nil
		}
		if lg != nil {
			lg.Debug("verifyBackendConsistency", zap.Bool("skipSafeRangeBucket", skipSafeRangeBucket))
		}
		b.BatchTx().LockOutsideApply()
		defer b.BatchTx().Unlock()
		b.ReadTx().RLock()
		defer b.ReadTx().RUnlock()
		for _, bkt := range bucket {
			if skipSafeRangeBucket && bkt.IsSafeRangeBucket() {
				continue
			}
			write, read := bucketData(b.BatchTx().UnsafeForEach, bkt), bucketData(b.ReadTx().UnsafeForEach, bkt)
			if differing := differingKeys(write, read); len(differing) > 0 {
				return false, map[string]any{"bucket": bkt.String(), "write TXN": write, "read TXN": read, "differing keys": differing}
			}
		}
		return true, nil
	})
}

func bucketData(forEach func(Bucket, func(k, v []byte) error) error, bkt Bucket) map[string]string {
	out := map[string]string{}
	_ = forEach(bkt, func(k, v []byte) error {
		out[string(k)] = string(v)
		return nil
	})
	return out
}

// differingKeys lists the keys whose values differ or that only one side has.
func differingKeys(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}
