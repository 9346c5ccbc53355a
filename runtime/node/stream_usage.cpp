#include "sluice/runtime/node/stream_usage.hpp"

#include "sluice/actors/usage.hpp"

namespace sluice::node {

namespace {

// The end of the first event in `s` from `from`: the index just past its
// blank line ("\n\n" or "\r\n\r\n"), or npos.
size_t event_end(std::string_view s, size_t from) {
  for (size_t i = s.find('\n', from); i != std::string_view::npos;
       i = s.find('\n', i + 1)) {
    if (i + 1 < s.size() && s[i + 1] == '\n')
      return i + 2;
    if (i + 2 < s.size() && s[i + 1] == '\r' && s[i + 2] == '\n')
      return i + 3;
  }
  return std::string_view::npos;
}

// The data of an event: its `data:` lines' values, joined by newlines.
std::string event_data(std::string_view event) {
  std::string data;
  bool first = true;
  while (!event.empty()) {
    auto nl = event.find('\n');
    auto line = event.substr(0, nl);
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (line.substr(0, 5) == "data:") {
      line.remove_prefix(5);
      if (!line.empty() && line.front() == ' ')
        line.remove_prefix(1);
      if (!first)
        data += '\n';
      data.append(line);
      first = false;
    }
    if (nl == std::string_view::npos)
      break;
    event.remove_prefix(nl + 1);
  }
  return data;
}

bool has_usage_key(std::string_view s) {
  return s.find("\"usage\"") != std::string_view::npos;
}

} // namespace

void drop_null_usage(std::string& s) {
  constexpr std::string_view key = "\"usage\"";
  if (s.find(key) == std::string::npos)
    return;
  int depth = 0;
  bool in_string = false;
  size_t last_comma = std::string::npos; // at depth 1, since the last member
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    switch (c) {
    case '{':
    case '[':
      ++depth;
      break;
    case '}':
    case ']':
      --depth;
      break;
    case ',':
      if (depth == 1)
        last_comma = i;
      break;
    case '"': {
      if (depth == 1 && s.compare(i, key.size(), key) == 0) {
        // "usage" at the top level: is its value null?
        size_t j = i + key.size();
        while (j < s.size() && (s[j] == ' ' || s[j] == '\t'))
          ++j;
        if (j < s.size() && s[j] == ':') {
          ++j;
          while (j < s.size() && (s[j] == ' ' || s[j] == '\t'))
            ++j;
          if (s.compare(j, 4, "null") == 0) {
            size_t end = j + 4;
            if (last_comma != std::string::npos) {
              s.erase(last_comma, end - last_comma); // ,"usage":null
            } else {
              // The first member: take the comma after it.
              size_t k = end;
              while (k < s.size() && (s[k] == ' ' || s[k] == '\t'))
                ++k;
              if (k < s.size() && s[k] == ',')
                end = k + 1;
              s.erase(i, end - i);
            }
            return;
          }
        }
      }
      in_string = true;
      break;
    }
    default:
      break;
    }
  }
}

bool stream_usage::keep_event(std::string& event) {
  if (!has_usage_key(event))
    return true;
  auto data = event_data(event);
  if (auto u = read_usage(data))
    usage_ = u;
  if (!strip_)
    return true;
  if (is_usage_chunk(data))
    return false;
  // Another chunk of a stream the gateway asked usage of: its
  // `"usage":null` is the gateway's doing, not the client's.
  auto at = event.find("data:");
  if (at != std::string::npos) {
    auto nl = event.find('\n', at);
    std::string line =
        event.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    auto before = line.size();
    drop_null_usage(line);
    if (line.size() != before)
      event.replace(at, before, line);
  }
  return true;
}

void stream_usage::feed(std::string& piece) {
  if (!held_.empty() && strip_) {
    held_ += piece;
    piece.swap(held_);
    held_.clear();
  }
  std::string_view view{piece};
  // Where the part of the piece that was looked at ends.
  size_t pos = 0;
  if (passing_) {
    // The end of an event too long to hold: all of it passes. Its blank
    // line may begin in the piece before: `tail_` keeps that one's end.
    std::string joint = tail_ + piece.substr(0, 3);
    auto end = event_end(joint, 0);
    end = end != std::string_view::npos && end > tail_.size()
              ? end - tail_.size()
              : event_end(view, 0);
    if (end == std::string_view::npos) {
      keep_tail(piece);
      return;
    }
    passing_ = false;
    tail_.clear();
    pos = end;
  } else if (!strip_ && !held_.empty()) {
    // Read only: the piece passes as it came; the event begun before it
    // is read whole from the copy.
    size_t old = held_.size();
    held_.append(piece);
    auto end = event_end(held_, old >= 3 ? old - 3 : 0);
    if (end == std::string_view::npos) {
      if (held_.size() > max_held_event_bytes) {
        start_passing();
        keep_tail(piece);
      }
      return;
    }
    held_.resize(end);
    keep_event(held_);
    held_.clear();
    pos = end - old;
  }
  std::string out;
  bool edited = false;
  size_t kept_to = 0; // piece[kept_to, pos) is still to be copied to out
  for (;;) {
    auto end = event_end(view, pos);
    if (end == std::string_view::npos)
      break;
    std::string event = piece.substr(pos, end - pos);
    auto size = event.size();
    bool keep = keep_event(event);
    if (strip_ && (!keep || event.size() != size)) {
      if (!edited) {
        out.reserve(piece.size());
        edited = true;
      }
      out.append(piece, kept_to, pos - kept_to);
      if (keep)
        out += event;
      kept_to = end;
    }
    pos = end;
  }
  // The rest is a partial event.
  size_t rest = piece.size() - pos;
  if (rest > 0) {
    if (rest > max_held_event_bytes) {
      start_passing();
      keep_tail(piece);
    } else if (strip_) {
      held_.assign(piece, pos, rest);
      if (!edited) {
        piece.resize(pos);
        return;
      }
      out.append(piece, kept_to, pos - kept_to);
      piece.swap(out);
      return;
    } else {
      held_.assign(piece, pos, rest);
    }
  }
  if (edited) {
    out.append(piece, kept_to, std::string::npos);
    piece.swap(out);
  }
}

void stream_usage::keep_tail(const std::string& piece) {
  if (piece.size() >= 2) {
    tail_.assign(piece, piece.size() - 2, 2);
  } else {
    tail_ += piece;
    if (tail_.size() > 2)
      tail_.erase(0, tail_.size() - 2);
  }
}

void stream_usage::start_passing() {
  held_.clear();
  passing_ = true;
  tail_.clear();
}

std::string stream_usage::flush() {
  // An answer that ended without the blank line after its last event:
  // that event is read (and stripped) as any other.
  std::string rest;
  if (!held_.empty() && !passing_) {
    bool keep = keep_event(held_);
    if (strip_ && keep)
      rest.swap(held_);
  }
  held_.clear();
  tail_.clear();
  passing_ = false;
  return rest;
}

} // namespace sluice::node
