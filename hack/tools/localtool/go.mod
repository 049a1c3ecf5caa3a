// The local stack helper; standard library only.
module github.com/nativejobset/jobset/hack/tools/localtool

go 1.26.0
