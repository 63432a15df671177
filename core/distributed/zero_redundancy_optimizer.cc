#include "core/distributed/zero_redundancy_optimizer.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/fill_copy.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"

namespace mixrt::distributed {
namespace {

// AdamW's state per parameter (optimizer.cc names them): the moments have
// the parameter's shape, the step count is one number.
struct AdamWStateEntry {
  const char* name;
  bool per_element;
  bool amsgrad_only;
};
constexpr AdamWStateEntry kAdamWState[] = {
    {"exp_avg", true, false},
    {"exp_avg_sq", true, false},
    {"step", false, false},
    {"max_exp_avg_sq", true, true},
};

// PyTorch's partition: largest parameter first (ties: earlier first), each
// to the rank with the fewest elements so far (ties: the lowest rank).
std::vector<int> Partition(const std::vector<Tensor>& params, int world) {
  std::vector<size_t> order(params.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return params[a].numel() > params[b].numel();
  });
  std::vector<int64_t> load(world, 0);
  std::vector<int> owner(params.size(), 0);
  for (size_t i : order) {
    const int r = static_cast<int>(std::min_element(load.begin(), load.end()) -
                                   load.begin());
    owner[i] = r;
    load[r] += params[i].numel();
  }
  return owner;
}

// "<i>.<name>" -> (i, name); false for another key.
bool SplitKey(const std::string& key, size_t* index, std::string* name) {
  const size_t dot = key.find('.');
  if (dot == std::string::npos) return false;
  *name = key.substr(dot + 1);
  return absl::SimpleAtoi(key.substr(0, dot), index);
}

// The flat f32 buffer of `params` (concatenated), on `device`.
absl::StatusOr<Tensor> Flat(const std::vector<Tensor>& params,
                            const Device& device) {
  int64_t total = 0;
  for (const Tensor& p : params) total += p.numel();
  return empty({total}, DType::kF32, device);
}

}  // namespace

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(
    std::vector<Tensor> params, std::shared_ptr<ProcessGroup> group,
    AdamWOptions options)
    : Optimizer(std::move(params), options.lr, options.weight_decay),
      group_(std::move(group)),
      options_(options) {
  owner_ = Partition(params_, group_->world_size());
  std::vector<Tensor> mine;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (owner_[i] != group_->rank()) continue;
    owned_.push_back(i);
    mine.push_back(params_[i]);
  }
  shard_ = std::make_unique<AdamW>(std::move(mine), options);
}

absl::StatusOr<std::unique_ptr<ZeroRedundancyOptimizer>>
ZeroRedundancyOptimizer::Create(std::vector<Tensor> params,
                                std::shared_ptr<ProcessGroup> group,
                                AdamWOptions options) {
  if (group == nullptr) {
    return absl::InvalidArgumentError(
        "ZeroRedundancyOptimizer: no process group given");
  }
  if (params.empty()) {
    return absl::InvalidArgumentError(
        "ZeroRedundancyOptimizer: no parameters given");
  }
  MIXRT_RETURN_IF_ERROR(CheckAdamWOptions(options));
  for (const Tensor& p : params) {
    if (!p.defined() || p.dtype() != DType::kF32 || !p.is_contiguous()) {
      return absl::InvalidArgumentError(
          "ZeroRedundancyOptimizer: parameters must be contiguous f32 "
          "tensors (master weights)");
    }
  }
  std::unique_ptr<ZeroRedundancyOptimizer> opt(new ZeroRedundancyOptimizer(
      std::move(params), std::move(group), options));
  MIXRT_RETURN_IF_ERROR(opt->options_status_);
  return opt;
}

absl::Status ZeroRedundancyOptimizer::step(
    const kernels::StepScaling& scaling) {
  MIXRT_RETURN_IF_ERROR(BeginStep());
  consolidated_.reset();
  // A schedule moves this optimizer's lr; the shard steps with it.
  MIXRT_RETURN_IF_ERROR(shard_->set_lr(lr()));
  MIXRT_RETURN_IF_ERROR(shard_->step(scaling));
  return BroadcastShards();
}

absl::Status ZeroRedundancyOptimizer::BroadcastShards() {
  const Device device = params_[0].device();
  for (int r = 0; r < group_->world_size(); ++r) {
    std::vector<Tensor> shard;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (owner_[i] == r) shard.push_back(params_[i].detach());
    }
    if (shard.empty()) continue;
    MIXRT_ASSIGN_OR_RETURN(Tensor flat, Flat(shard, device));
    std::vector<Tensor> slices;
    int64_t at = 0;
    for (const Tensor& p : shard) {
      MIXRT_ASSIGN_OR_RETURN(Tensor s, flat.slice(0, at, at + p.numel()));
      MIXRT_ASSIGN_OR_RETURN(s, s.view(p.shape()));
      slices.push_back(s);
      at += p.numel();
    }
    if (r == group_->rank()) {
      for (size_t k = 0; k < shard.size(); ++k) {
        MIXRT_RETURN_IF_ERROR(kernels::copy_(slices[k], shard[k]));
      }
    }
    MIXRT_ASSIGN_OR_RETURN(Work work, group_->Broadcast(flat, r));
    MIXRT_RETURN_IF_ERROR(work.Wait());
    if (r == group_->rank()) continue;
    for (size_t k = 0; k < shard.size(); ++k) {
      MIXRT_RETURN_IF_ERROR(kernels::copy_(shard[k], slices[k]));
    }
  }
  return absl::OkStatus();
}

std::map<std::string, Tensor> ZeroRedundancyOptimizer::GlobalKeys(
    const std::vector<std::pair<std::string, Tensor>>& local) const {
  std::map<std::string, Tensor> out;
  for (const auto& [key, t] : local) {
    size_t k = 0;
    std::string name;
    if (!SplitKey(key, &k, &name) || k >= owned_.size()) continue;
    out[absl::StrCat(owned_[k], ".", name)] = t;
  }
  return out;
}

std::vector<std::pair<std::string, Tensor>>
ZeroRedundancyOptimizer::state_dict() const {
  const std::map<std::string, Tensor> state =
      consolidated_.has_value() ? *consolidated_
                                : GlobalKeys(shard_->state_dict());
  return {state.begin(), state.end()};
}

absl::Status ZeroRedundancyOptimizer::consolidate_state_dict(int to) {
  if (to < 0 || to >= group_->world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("consolidate_state_dict: rank ", to, " is not in [0, ",
                     group_->world_size(), ")"));
  }
  const Device device = params_[0].device();
  const std::map<std::string, Tensor> mine = GlobalKeys(shard_->state_dict());
  std::map<std::string, Tensor> all;
  // Per owner: which of its parameters have state (a parameter that never
  // had a gradient has none), then those tensors, broadcast in key order.
  for (int r = 0; r < group_->world_size(); ++r) {
    std::vector<size_t> shard;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (owner_[i] == r) shard.push_back(i);
    }
    if (shard.empty()) continue;
    std::vector<float> present(shard.size(), 0);
    for (size_t k = 0; k < shard.size(); ++k) {
      present[k] = mine.count(absl::StrCat(shard[k], ".step")) ? 1 : 0;
    }
    MIXRT_ASSIGN_OR_RETURN(
        Tensor flags,
        from_floats(present, {static_cast<int64_t>(present.size())},
                    DType::kF32, device));
    MIXRT_ASSIGN_OR_RETURN(Work work, group_->Broadcast(flags, r));
    MIXRT_RETURN_IF_ERROR(work.Wait());
    MIXRT_ASSIGN_OR_RETURN(present, flags.to_float_vector());
    for (size_t k = 0; k < shard.size(); ++k) {
      if (present[k] == 0) continue;
      const size_t i = shard[k];
      for (const AdamWStateEntry& entry : kAdamWState) {
        if (entry.amsgrad_only && !options_.amsgrad) continue;
        const Shape shape = entry.per_element ? params_[i].shape() : Shape{1};
        const std::string key = absl::StrCat(i, ".", entry.name);
        Tensor t;
        if (r == group_->rank()) {
          MIXRT_ASSIGN_OR_RETURN(t, mine.at(key).clone());
        } else {
          MIXRT_ASSIGN_OR_RETURN(t, empty(shape, DType::kF32, device));
        }
        MIXRT_ASSIGN_OR_RETURN(Work w, group_->Broadcast(t, r));
        MIXRT_RETURN_IF_ERROR(w.Wait());
        if (group_->rank() == to) all[key] = t;
      }
    }
  }
  if (group_->rank() == to) consolidated_ = std::move(all);
  return absl::OkStatus();
}

std::map<std::string, Tensor> ZeroRedundancyOptimizer::ShardEntries(
    const std::map<std::string, Tensor>& state) const {
  std::map<std::string, Tensor> local;
  for (size_t k = 0; k < owned_.size(); ++k) {
    for (const AdamWStateEntry& entry : kAdamWState) {
      auto it = state.find(absl::StrCat(owned_[k], ".", entry.name));
      if (it != state.end()) {
        local[absl::StrCat(k, ".", entry.name)] = it->second;
      }
    }
  }
  return local;
}

absl::Status ZeroRedundancyOptimizer::check_state_dict(
    const std::map<std::string, Tensor>& state) const {
  return shard_->check_state_dict(ShardEntries(state));
}

absl::Status ZeroRedundancyOptimizer::load_state_dict(
    const std::map<std::string, Tensor>& state) {
  for (const auto& [key, t] : state) {
    size_t i = 0;
    std::string name;
    if (!SplitKey(key, &i, &name) || i >= params_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ZeroRedundancyOptimizer: state entry '", key,
                       "' names no parameter (expected <index>.<name> below ",
                       params_.size(), ")"));
    }
  }
  consolidated_.reset();
  return shard_->load_state_dict(ShardEntries(state));
}

absl::StatusOr<double> ZeroRedundancyOptimizer::momentum() const {
  return shard_->momentum();
}

absl::Status ZeroRedundancyOptimizer::set_momentum(double beta1) {
  MIXRT_RETURN_IF_ERROR(shard_->set_momentum(beta1));
  options_.beta1 = beta1;
  return absl::OkStatus();
}

uint64_t ZeroRedundancyOptimizer::state_bytes() const {
  uint64_t bytes = 0;
  for (const auto& [key, t] : shard_->state_dict()) {
    bytes += static_cast<uint64_t>(t.numel()) * DTypeSize(t.dtype());
  }
  return bytes;
}

}  // namespace mixrt::distributed
