// Emitted source built line by line at an indent level (Inductor's
// IndentedBuffer), instead of "\n" and spaces inside string concatenations.
#ifndef MIXRT_PLUGINS_SDK_SOURCE_WRITER_H_
#define MIXRT_PLUGINS_SDK_SOURCE_WRITER_H_

#include <string>
#include <string_view>
#include <utility>

#include "plugins/sdk/strings.h"

namespace mixrt::sdk {

class SourceWriter {
 public:
  // One line at the current indent, from its parts.
  template <typename... Parts>
  void Line(const Parts&... parts) {
    text_.append(2 * indent_, ' ');
    StrAppend(&text_, parts...);
    text_ += '\n';
  }
  // A line ending in "{"; what follows is indented until Close.
  template <typename... Parts>
  void Open(const Parts&... parts) {
    Line(parts..., " {");
    ++indent_;
  }
  void Close(std::string_view closing = "}") {
    --indent_;
    Line(closing);
  }
  // A line that starts at column 0 whatever the indent (a preprocessor
  // directive).
  void Directive(std::string_view line) { StrAppend(&text_, line, "\n"); }
  // Text taken as it is (a prelude, another writer's lines).
  void Verbatim(std::string_view text) { StrAppend(&text_, text); }

  const std::string& text() const { return text_; }
  std::string Take() && { return std::move(text_); }

 private:
  std::string text_;
  int indent_ = 0;
};

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_SOURCE_WRITER_H_
