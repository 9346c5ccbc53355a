#include "sluice/actors/mcp/sse_reader.hpp"

namespace sluice::mcp {

namespace {

/// Room for a field's name and colon before a line's data.
constexpr size_t field_room = 64;

/// The longest event id kept (a longer one is ignored).
constexpr size_t max_event_id = 256;

} // namespace

sse_reader::sse_reader(size_t max_event)
    : max_event_(max_event)
    , lines_(max_event + field_room) {
  // nop
}

size_t sse_reader::dropped_events() const noexcept {
  return dropped_;
}

void sse_reader::feed(std::string_view bytes, const event_handler& on_event) {
  lines_.feed(bytes, [&](std::string_view line) { on_line(line, on_event); });
}

void sse_reader::on_line(std::string_view line, const event_handler& on_event) {
  if (lines_.dropped_lines() != lines_dropped_) { // a line of this event
    lines_dropped_ = lines_.dropped_lines();
    over_ = true;
  }
  if (line.empty()) { // the event is complete
    bool message = type_.empty() || type_ == "message";
    if (over_)
      ++dropped_;
    else if (has_data_ && !data_.empty() && message) // empty: none (WHATWG)
      on_event(data_);
    data_.clear();
    type_.clear();
    has_data_ = false;
    over_ = false;
    return;
  }
  if (line.front() == ':')
    return; // a comment (a keep-alive)
  auto colon = line.find(':');
  auto field = line.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ')
      value.remove_prefix(1);
  }
  if (field == "data") {
    if (over_)
      return;
    auto add = value.size() + (has_data_ ? 1 : 0);
    if (data_.size() + add > max_event_) {
      over_ = true;
      data_.clear();
      data_.shrink_to_fit();
      return;
    }
    if (has_data_)
      data_ += '\n';
    data_.append(value.data(), value.size());
    has_data_ = true;
  } else if (field == "event") {
    type_.assign(value.substr(0, field_room));
  } else if (field == "id") {
    if (value.size() <= max_event_id &&
        value.find('\0') == std::string_view::npos)
      last_id_.assign(value.data(), value.size());
  }
  // `retry` and unknown fields: ignored, as the standard says.
}

} // namespace sluice::mcp
