#include "sluice/runtime/redis/subscriber.hpp"

#include "sluice/actors/loops/system_hold.hpp"

namespace sluice {

struct redis_subscriber::hold {
  explicit hold(caf::actor_system& sys)
      : h(sys) {
    // nop
  }
  system_hold h;
};

redis_subscriber::redis_subscriber(caf::actor_system* sys, redis_config cfg,
                                   std::string channel, size_t max_bytes,
                                   handlers h)
    : hold_(sys ? std::make_unique<hold>(*sys) : nullptr)
    , client_(cfg)
    , pause_(cfg.reconnect_after)
    , channel_(std::move(channel))
    , max_bytes_(max_bytes)
    , handlers_(std::move(h)) {
  // nop
}

redis_subscriber::~redis_subscriber() {
  stop();
}

std::shared_ptr<redis_subscriber>
redis_subscriber::start(caf::actor_system* sys, redis_config cfg,
                        std::string channel, size_t max_bytes, handlers h) {
  auto self = std::make_shared<redis_subscriber>(
      sys, std::move(cfg), std::move(channel), max_bytes, std::move(h));
  // Under the lock the thread's first step takes: a handler that stops the
  // subscriber on its own thread finds `thread_` assigned.
  std::lock_guard<std::mutex> guard{self->mx_};
  self->thread_ = std::thread{[self] { self->run(); }};
  return self;
}

void redis_subscriber::stop() {
  {
    std::lock_guard<std::mutex> guard{mx_};
    if (stop_)
      return;
    stop_ = true;
  }
  cv_.notify_all();
  client_.interrupt();
  if (thread_.get_id() == std::this_thread::get_id())
    thread_.detach(); // never join ourselves
  else if (thread_.joinable())
    thread_.join();
}

void redis_subscriber::run() {
  while (!stopping()) {
    if (!client_.subscribe(channel_).ok()) {
      if (!stopping())
        notify(handlers_.error);
      pause();
      continue;
    }
    notify(handlers_.subscribed);
    while (auto payload = client_.next_message(max_bytes_))
      deliver(*payload);
    if (!stopping()) { // closed by Redis
      notify(handlers_.error);
      pause();
    }
  }
}

bool redis_subscriber::stopping() {
  std::lock_guard<std::mutex> guard{mx_};
  return stop_;
}

// Before subscribing again: no reconnect storm while Redis is down.
void redis_subscriber::pause() {
  std::unique_lock<std::mutex> lk{mx_};
  cv_.wait_for(lk, pause_, [this] { return stop_; });
}

void redis_subscriber::deliver(const std::string& payload) noexcept {
  try {
    if (handlers_.message)
      handlers_.message(payload);
  } catch (...) {
    notify(handlers_.error); // no memory: this one message is lost
  }
}

void redis_subscriber::notify(const std::function<void()>& f) noexcept {
  try {
    if (f)
      f();
  } catch (...) {
    // nothing to tell: a handler that cannot even count is ignored
  }
}

} // namespace sluice
