package apiserver

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// FuzzDecodeJobSet feeds a request body to every media type the server
// accepts (JSON, YAML and protobuf), with the
// strict and the lenient decoders. No panic, whatever the bytes; and a
// JobSet that decodes survives a round trip through every media type that
// can encode it unchanged, so what is stored and read back is what was sent.
func FuzzDecodeJobSet(f *testing.F) {
	for _, data := range decodeSeeds(f) {
		f.Add(data)
	}
	infos := encodable(Codecs.SupportedMediaTypes())
	gvk := v1alpha2.SchemeGroupVersion.WithKind("JobSet")

	f.Fuzz(func(t *testing.T, data []byte) {
		for _, info := range infos {
			decoders := []runtime.Decoder{info.Serializer}
			if info.StrictSerializer != nil {
				decoders = append(decoders, info.StrictSerializer)
			}
			for _, dec := range decoders {
				obj, _, err := dec.Decode(data, &gvk, &v1alpha2.JobSet{})
				if err != nil {
					continue
				}
				js, ok := obj.(*v1alpha2.JobSet)
				if !ok {
					continue
				}
				roundTrip(t, infos, js)
			}
		}
	})
}

// roundTrip encodes js with every media type and decodes it again.
func roundTrip(t *testing.T, infos []runtime.SerializerInfo, js *v1alpha2.JobSet) {
	t.Helper()
	js.APIVersion, js.Kind = v1alpha2.SchemeGroupVersion.String(), "JobSet"
	for _, info := range infos {
		var buf bytes.Buffer
		if err := info.Serializer.Encode(js, &buf); err != nil {
			t.Fatalf("%s: encoding a decoded JobSet: %v", info.MediaType, err)
		}
		back, _, err := info.Serializer.Decode(buf.Bytes(), nil, &v1alpha2.JobSet{})
		if err != nil {
			t.Fatalf("%s: decoding what was encoded: %v\n%s", info.MediaType, err, buf.Bytes())
		}
		if !apiequality.Semantic.DeepEqual(js, back) {
			t.Fatalf("%s: the round trip changed the JobSet:\n%s", info.MediaType, buf.Bytes())
		}
	}
}

// decodeSeeds are the seed JobSets and examples as they are (JSON and
// YAML), plus a protobuf encoding of each one that decodes, so that every
// media type's decoder gets seeds it accepts.
func decodeSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	var files []string
	for _, pattern := range []string{
		filepath.Join("..", "apis", "jobset", "validation", "testdata", "seed", "*.json"),
		filepath.Join("..", "..", "artifacts", "examples", "*.yaml"),
	} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			tb.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		tb.Fatal("no seed corpus")
	}
	proto := mediaType(tb, runtime.ContentTypeProtobuf)
	gvk := v1alpha2.SchemeGroupVersion.WithKind("JobSet")
	var out [][]byte
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, data)
		for _, info := range Codecs.SupportedMediaTypes() {
			obj, _, err := info.Serializer.Decode(data, &gvk, &v1alpha2.JobSet{})
			if err != nil {
				continue
			}
			js, ok := obj.(*v1alpha2.JobSet)
			if !ok {
				continue
			}
			js.APIVersion, js.Kind = v1alpha2.SchemeGroupVersion.String(), "JobSet"
			var buf bytes.Buffer
			if err := proto.Serializer.Encode(js, &buf); err != nil {
				tb.Fatalf("%s: protobuf encoding: %v", name, err)
			}
			out = append(out, buf.Bytes())
			break
		}
	}
	return out
}

func mediaType(tb testing.TB, mt string) runtime.SerializerInfo {
	tb.Helper()
	for _, info := range Codecs.SupportedMediaTypes() {
		if info.MediaType == mt {
			return info
		}
	}
	tb.Fatalf("the server offers no %s", mt)
	return runtime.SerializerInfo{}
}

// TestDecodeSeedsReachEveryMediaType: for every media type the server
// accepts, some seeds decode, so the fuzzer starts inside each decoder.
func TestDecodeSeedsReachEveryMediaType(t *testing.T) {
	seeds := decodeSeeds(t)
	gvk := v1alpha2.SchemeGroupVersion.WithKind("JobSet")
	for _, info := range encodable(Codecs.SupportedMediaTypes()) {
		n := 0
		for _, data := range seeds {
			if _, _, err := info.Serializer.Decode(data, &gvk, &v1alpha2.JobSet{}); err == nil {
				n++
			}
		}
		if n == 0 {
			t.Errorf("%s: no seed decodes", info.MediaType)
		}
		t.Logf("%s: %d of %d seeds decode", info.MediaType, n, len(seeds))
	}
}

// encodable keeps the media types that can encode a JobSet (protobuf is
// listed by the codec factory before the types implement it).
func encodable(infos []runtime.SerializerInfo) []runtime.SerializerInfo {
	var out []runtime.SerializerInfo
	js := &v1alpha2.JobSet{}
	js.APIVersion, js.Kind = v1alpha2.SchemeGroupVersion.String(), "JobSet"
	for _, info := range infos {
		if err := info.Serializer.Encode(js, &bytes.Buffer{}); err == nil {
			out = append(out, info)
		}
	}
	return out
}
