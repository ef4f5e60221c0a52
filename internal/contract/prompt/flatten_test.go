package prompt

import (
	"errors"
	"fmt"
	"testing"
)

func TestFlatten(t *testing.T) {
	img := func(u string) Part { return Part{Image: u, IsImage: true} }
	for _, c := range []struct {
		name   string
		parts  []Part
		text   string
		images []string
		tag    string // the reserved tag of the error, "" no error
	}{
		{"texts and images in order", []Part{{Text: "see "}, img("sha256:a"), {Text: " then "}, img("sha256:b")}, "see <image> then <image>", []string{"sha256:a", "sha256:b"}, ""},
		{"text only", []Part{{Text: "plain"}}, "plain", nil, ""},
		{"nothing", nil, "", nil, ""},
		{"image tag in a text", []Part{{Text: "a <image> b"}, img("x")}, "", nil, "<image>"},
		{"video tag", []Part{{Text: "<video>"}}, "", nil, "<video>"},
		{"audio tag", []Part{{Text: "x<audio>"}}, "", nil, "<audio>"},
		{"a tag's look-alike", []Part{{Text: "<images> <Image> < image>"}}, "<images> <Image> < image>", nil, ""},
		{"a tag across two texts", []Part{{Text: "<ima"}, {Text: "ge>"}}, "", nil, "<image>"},
		{"a video tag across two texts", []Part{{Text: "<vi"}, {Text: "deo>"}}, "", nil, "<video>"},
		{"a half tag before an image", []Part{{Text: "<image"}, img("x")}, "<image<image>", []string{"x"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			text, images, err := Flatten(c.parts)
			if c.tag != "" {
				if !errors.Is(err, ErrReservedTag) || err == nil || !containsTag(err, c.tag) {
					t.Fatalf("err %v, want ErrReservedTag naming %s", err, c.tag)
				}
				return
			}
			if err != nil || text != c.text || fmt.Sprint(images) != fmt.Sprint(c.images) {
				t.Errorf("Flatten = %q, %v, %v; want %q, %v", text, images, err, c.text, c.images)
			}
		})
	}
}

func containsTag(err error, tag string) bool {
	return len(err.Error()) > 0 && ReservedTag(err.Error()) == tag
}
