package prompt

import (
	"errors"
	"fmt"
	"strings"
)

// ImagePlaceholder stands for one image in a message's text once its
// parts are flattened, in the order of the images: LLaMA-Factory's
// IMAGE_PLACEHOLDER default, ms-swift's tag, and the tag verl's and
// OpenRLHF's multimodal loaders replace by an image.
const ImagePlaceholder = "<image>"

// ReservedTags are the placeholders trainers' loaders replace by media
// (LLaMA-Factory, ms-swift, verl: images, videos, audio clips): a text
// holding one would be read as media that is not there.
var ReservedTags = []string{ImagePlaceholder, "<video>", "<audio>"}

// ErrReservedTag is wrapped by Flatten's error for a text that holds one
// of ReservedTags.
var ErrReservedTag = errors.New("a text holds a media placeholder")

// ReservedTag returns the first of ReservedTags in s, or "".
func ReservedTag(s string) string {
	for _, tag := range ReservedTags {
		if strings.Contains(s, tag) {
			return tag
		}
	}
	return ""
}

// Part is one part of a chat message to flatten: a text, or an image
// (Image its URL or reference, IsImage set).
type Part struct {
	Text    string
	Image   string
	IsImage bool
}

// Flatten is the one conversion of a chat message's parts to the string
// content trainers and SFT formats take: the texts as they are, each
// image as ImagePlaceholder where it stood; images are the parts' images
// in that order. A text that holds one of ReservedTags, alone or joined
// to the next part, is an error (ErrReservedTag, naming the tag): the
// placeholders would no longer match the images.
func Flatten(parts []Part) (text string, images []string, err error) {
	var b strings.Builder
	for _, p := range parts {
		if p.IsImage {
			b.WriteString(ImagePlaceholder)
			images = append(images, p.Image)
			continue
		}
		if tag := ReservedTag(p.Text); tag != "" {
			return "", nil, fmt.Errorf("%w: %s, which trainers read as a media placeholder", ErrReservedTag, tag)
		}
		b.WriteString(p.Text)
	}
	// Two texts side by side can spell a tag neither holds ("<ima",
	// "ge>"): the whole text must hold the placeholders of the images and
	// nothing else reserved.
	text = b.String()
	rest := strings.ReplaceAll(text, ImagePlaceholder, "")
	if n := strings.Count(text, ImagePlaceholder); n != len(images) {
		return "", nil, fmt.Errorf("%w: %s %d times for %d images, which trainers read as media placeholders", ErrReservedTag, ImagePlaceholder, n, len(images))
	}
	if tag := ReservedTag(rest); tag != "" {
		return "", nil, fmt.Errorf("%w: %s, which trainers read as a media placeholder", ErrReservedTag, tag)
	}
	return text, images, nil
}
