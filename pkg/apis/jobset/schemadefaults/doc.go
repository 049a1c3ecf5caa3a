// Package schemadefaults applies to the Job and PersistentVolumeClaim
// templates embedded in a JobSet the defaults that their OpenAPI schema
// declares, the way a CRD-served JobSet gets them from its structural schema.
//
// # Why
//
// Upstream JobSet is a CRD. The API server defaults a custom resource from
// the `default` values of its structural schema, and that schema carries the
// `+default=` markers of k8s.io/api for everything embedded in a JobSet, for
// example `containers[].ports[].protocol: TCP` or `grpc.service: ""`.
// Consumers such as Kueue compare pod templates field by field, so a JobSet
// served without those defaults looks different from the one they wrote and
// is requeued for ever. This package gives the natively served JobSet the same
// defaults.
//
// # Where the defaults come from
//
// Nothing is listed by hand: the schema is read from the generated OpenAPI
// definitions (pkg/generated/openapi), once, lazily. `$ref`s are resolved by
// model name ("io.k8s.api.batch.v1.JobTemplateSpec" and so on).
//
// openapi-gen writes two kinds of `default`: the ones declared with a
// `+default=` marker, and a zero value (`""`, `0`, `false`, `{}`) that it
// emits on its own for every non-pointer field without omitempty (and `{}`
// for every non-pointer struct field). Both look the same in the schema. The
// Go type of the field tells them apart where it matters: a zero default on a
// non-pointer field cannot change a typed value (the field already holds that
// zero after the typed round trip), and for types with their own JSON form
// (Time, IntOrString, Quantity) it could even make an undecodable value, so
// such defaults are left out. Every other default is kept: any default on a
// pointer field (`grpc.service: ""`, `fileKeyRef.optional: false`, a
// `+default=0` on a *int32) and any non-zero default. These are the
// "effective" defaults; DeclaredDefaults lists them.
//
// A zero-valued marker on a non-pointer omitempty field (for example
// `LocalObjectReference.name: ""`) is a no-op on typed values for the same
// reason and is therefore not listed either.
//
// # Semantics
//
// The walk follows the structural defaulting of apiextensions-apiserver:
//
//   - in an object, a property that is absent, or present with a null value
//     while the schema does not say nullable, gets a deep copy of its
//     default; a CRD first prunes such nulls and then defaults them, which
//     comes to the same;
//   - a null that has no default is left where it is: a CRD would prune it,
//     and after the conversion back to the typed value null and absent are
//     the same nil;
//   - the walk then descends into present objects (properties), arrays
//     (items) and maps (additionalProperties), including values that were
//     just set from a default; a null array item or map value with a default
//     gets the default too;
//   - a missing parent is never created.
//
// # Cost
//
// Subtrees that cannot reach an effective default are skipped: every schema
// node knows, after a fixpoint computed at build time, whether one is
// reachable from it. Before converting anything, a read-only pass over the
// typed value, along those paths only, checks whether some default is
// missing at all; when none is (the usual case, since the generated
// defaulters run first and read the same markers), the call costs a few
// microseconds and no allocation. Otherwise the whole value goes through the
// unstructured walk above. The pass errs towards converting: where the Go
// value does not look like what it expects, it lets the walk decide.
//
// # Failure
//
// ApplyToJobTemplate and ApplyToPersistentVolumeClaim return an error only if
// the conversion of the typed value to or from its unstructured form fails.
// That does not happen for a typed value that came off the wire: every such
// value of a k8s.io/api type converts to unstructured, and the result
// converts back (the one known exception needs a value JSON cannot carry,
// such as a metav1.Time past the year 9999 built in Go). The defaults added
// on the way are checked at build time to decode into the Go type of their
// field (a default that would not is dropped and recorded as a build
// problem, which the tests assert never happens). The value is only replaced
// when the conversion back succeeded, and only converted back when a default
// was actually set, so a template that needs no default is left untouched.
package schemadefaults
