package v1alpha2

import (
	"bytes"
	"math/rand"
	"testing"

	apitestingfuzzer "k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/diff"
)

// protoMessage is what the generated marshalling gives every served type.
type protoMessage interface {
	runtime.Object
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// TestProtobufRoundTrip fills every served type with random values and
// checks that protobuf encoding loses nothing: a field without a protobuf
// number, or one the generator skipped, comes back empty and fails here.
func TestProtobufRoundTrip(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	codecs := serializer.NewCodecFactory(scheme)
	filler := apitestingfuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(1), codecs)
	for _, newObj := range []func() protoMessage{
		func() protoMessage { return &JobSet{} },
		func() protoMessage { return &JobSetList{} },
		func() protoMessage { return &ReplicatedJobResource{} },
		func() protoMessage { return &ReplicatedJobResourceList{} },
	} {
		for range 30 {
			in := newObj()
			filler.Fill(in)
			data, err := in.Marshal()
			if err != nil {
				t.Fatalf("%T: marshal: %v", in, err)
			}
			out := newObj()
			if err := out.Unmarshal(data); err != nil {
				t.Fatalf("%T: unmarshal: %v", in, err)
			}
			// TypeMeta is not part of the message: the envelope carries it.
			in.GetObjectKind().SetGroupVersionKind(out.GetObjectKind().GroupVersionKind())
			if !apiequality.Semantic.DeepEqual(in, out) {
				t.Fatalf("%T changed in a protobuf round trip:\n%s", in, diff.Diff(in, out))
			}
		}
	}
}

// TestProtobufSerializer encodes a JobSet with the protobuf serializer the
// API server uses and decodes it back, envelope and kind included.
func TestProtobufSerializer(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	codecs := serializer.NewCodecFactory(scheme)
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	filler := apitestingfuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(2), codecs)
	in := &JobSet{}
	filler.Fill(in)
	in.TypeMeta = metav1.TypeMeta{APIVersion: SchemeGroupVersion.String(), Kind: "JobSet"}
	// The bare serializer: no conversion, no defaulting on decode.
	data, err := runtime.Encode(info.Serializer, in)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	if !bytes.HasPrefix(data, []byte("k8s\x00")) {
		t.Fatalf("encoding starts with %q, want the protobuf envelope's magic", data[:min(len(data), 4)])
	}
	out, _, err := info.Serializer.Decode(data, nil, nil)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if !apiequality.Semantic.DeepEqual(in, out) {
		t.Fatalf("JobSet changed through the protobuf serializer:\n%s", diff.Diff(in, out))
	}
}
