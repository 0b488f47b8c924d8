/**
 * A second change to node-llama-cpp's addon source: `decodeBatchAndSample(logitIndexes, samplers)` on
 * the native context decodes the batch and then samples each given batch logit index with its sampler,
 * all in one job of libuv's pool, and resolves once with every token (a Uint32Array);
 * `decodeBatchAndSampleSync` does the same on the calling thread and returns the tokens.
 *
 * Through the binding as shipped a step is `decodeBatch()` and then `sampleToken()` per generating
 * sequence, each a job of its own whose completion wakes node's main thread; on a busy CPU each
 * wake-up waits for a time slice, and a bare llama-server decodes and samples in one thread with no
 * such hand-off. The samples here are the ones `sampleToken` takes (same sampler chain, no
 * probabilities or logits asked for), so the tokens are the same.
 *
 * A token that could not be sampled is NO_TOKEN (sampleToken's -1); a sampler that threw is
 * SAMPLE_FAILED, with its message at the same index of the array's `errors` property (set only then).
 * A failed decode rejects (throws), and nothing is sampled.
 *
 * The pool job still hands off twice a step (its completion wakes the main thread, whose next batch
 * wakes the pool thread); on the main thread there is no hand-off, as in llama-server's one loop, and
 * the event loop runs between steps.
 */

import { splice } from './addon-splice.js';

/** The method's name on the native context. */
export const FUSED_METHOD = 'decodeBatchAndSample';
/** No token was sampled (an empty candidate list): what sampleToken answers as -1. */
export const NO_TOKEN = 0xffffffff;
/** The sampler threw; the message is in `errors`. */
export const SAMPLE_FAILED = 0xfffffffe;

const DECLARE_AT = '        Napi::Value SampleToken(const Napi::CallbackInfo& info);';
const DECLARE = '        Napi::Value DecodeBatchAndSample(const Napi::CallbackInfo& info);\n        Napi::Value DecodeBatchAndSampleSync(const Napi::CallbackInfo& info);';
const REGISTER_AT = '                InstanceMethod("sampleToken", &AddonContext::SampleToken),';
const REGISTER = `                InstanceMethod("${FUSED_METHOD}", &AddonContext::DecodeBatchAndSample),\n                InstanceMethod("${FUSED_METHOD}Sync", &AddonContext::DecodeBatchAndSampleSync),`;
const DEFINE_AT = 'Napi::Value AddonContext::DecodeBatch(const Napi::CallbackInfo& info) {';

const WORKER = String.raw`// One step of the engine's loop: decode the batch, then sample the given logit indexes with their
// samplers. DecodeAndSampleStep holds what it needs and what it gives; Run() does the work (on a pool
// thread for decodeBatchAndSample, on the calling thread for decodeBatchAndSampleSync).
struct DecodeAndSampleStep {
    AddonContext* ctx;
    std::vector<int32_t> logitIndexes;
    std::vector<AddonSampler*> samplers;
    std::vector<uint32_t> tokens;
    std::vector<std::string> errors;
    bool anyFailed = false;

    // Takes a reference on the context and each sampler (dropped by Release) while the step may run.
    DecodeAndSampleStep(const Napi::CallbackInfo& info, AddonContext* ctx) : ctx(ctx) {
        ctx->Ref();
        const auto indexes = info[0].As<Napi::Uint32Array>();
        const auto samplerObjects = info[1].As<Napi::Array>();
        const size_t n = std::min(indexes.ElementLength(), static_cast<size_t>(samplerObjects.Length()));
        logitIndexes.reserve(n);
        samplers.reserve(n);
        for (size_t i = 0; i < n; i++) {
            logitIndexes.push_back(static_cast<int32_t>(indexes[i]));
            AddonSampler* sampler = Napi::ObjectWrap<AddonSampler>::Unwrap(samplerObjects.Get(static_cast<uint32_t>(i)).As<Napi::Object>());
            sampler->Ref();
            samplers.push_back(sampler);
        }
        tokens.assign(n, ${NO_TOKEN}u);
        errors.assign(n, std::string());
    }

    void Release() {
        ctx->Unref();
        for (auto sampler : samplers) {
            sampler->Unref();
        }
        samplers.clear();
    }

    // The decode's error, or "" when it decoded (each sample's own error is in errors).
    std::string Run() {
        try {
            ctx->sharedSamplerData.gotLogit = false;
            ctx->sharedSamplerData.hasLogits = false;

            int r = llama_decode(ctx->ctx, ctx->batch);

            if (r != 0) {
                if (r == 1) {
                    return "could not find a KV slot for the batch (try reducing the size of the batch or increase the context)";
                }

                return "Eval has failed";
            }

            llama_synchronize(ctx->ctx);
        } catch (const std::exception& e) {
            return e.what();
        } catch(...) {
            return "Unknown error when calling \"llama_decode\"";
        }

        for (size_t i = 0; i < samplers.size(); i++) {
            try {
                tokens[i] = SampleOne(samplers[i], logitIndexes[i]);
            } catch (const std::exception& e) {
                tokens[i] = ${SAMPLE_FAILED}u;
                errors[i] = e.what();
                anyFailed = true;
            } catch(...) {
                tokens[i] = ${SAMPLE_FAILED}u;
                errors[i] = "Unknown error when calling \"SampleToken\"";
                anyFailed = true;
            }
        }

        return "";
    }

    // As AddonContextSampleTokenWorker::SampleToken with nothing but the token asked for.
    uint32_t SampleOne(AddonSampler* sampler, int32_t batchLogitIndex) {
        sampler->rebuildChainIfNeeded();

        std::unique_lock<std::mutex> samplingLock(ctx->sharedSamplerData.mutex);
        if (!ctx->sharedSamplerData.gotLogit) {
            ctx->sharedSamplerData.hasLogits = llama_get_logits(ctx->ctx) != nullptr;
            ctx->sharedSamplerData.gotLogit = true;
        }

        if (!ctx->sharedSamplerData.hasLogits) {
            throw std::runtime_error("This model does not support token generation");
        }

        llama_token_data_array cur_p;
        sampler->sampleAndReleaseLock(ctx->sharedSamplerData.mutex, samplingLock, ctx->ctx, batchLogitIndex, cur_p, false);

        if (cur_p.size == 0 || !(cur_p.selected >= 0 && cur_p.selected < (int32_t)cur_p.size)) {
            return ${NO_TOKEN}u;
        }

        auto new_token_id = cur_p.data[cur_p.selected].id;

        try {
            sampler->acceptToken(new_token_id);
        } catch (const std::exception& e) {
            throw std::runtime_error(std::string("Failed to accept token in sampler: ") + e.what());
        } catch(...) {
            throw std::runtime_error("Unknown error when calling \"acceptToken\"");
        }

        return static_cast<uint32_t>(new_token_id);
    }

    Napi::Value Result(Napi::Env env) {
        auto result = Napi::Uint32Array::New(env, tokens.size());
        for (size_t i = 0; i < tokens.size(); i++) {
            result[i] = tokens[i];
        }

        if (anyFailed) {
            auto messages = Napi::Array::New(env, errors.size());
            for (size_t i = 0; i < errors.size(); i++) {
                messages.Set(static_cast<uint32_t>(i), Napi::String::New(env, errors[i]));
            }
            result.Set("errors", messages);
        }

        return result;
    }
};

// The step in one pool job: one completion (one wake-up of the main thread) per step instead of one
// per decode and per sample.
class AddonContextDecodeBatchAndSampleWorker : public Napi::AsyncWorker {
    public:
        AddonContextDecodeBatchAndSampleWorker(const Napi::CallbackInfo& info, AddonContext* ctx)
            : Napi::AsyncWorker(info.Env(), "AddonContextDecodeBatchAndSampleWorker"),
              step(info, ctx),
              deferred(Napi::Promise::Deferred::New(info.Env())) {
        }
        ~AddonContextDecodeBatchAndSampleWorker() {
            step.Release();
        }

        Napi::Promise GetPromise() {
            return deferred.Promise();
        }

    protected:
        DecodeAndSampleStep step;
        Napi::Promise::Deferred deferred;

        void Execute() {
            const auto err = step.Run();
            if (!err.empty()) {
                SetError(err);
            }
        }
        void OnOK() {
            deferred.Resolve(step.Result(Env()));
        }
        void OnError(const Napi::Error& err) {
            deferred.Reject(err.Value());
        }
};

static bool checkDecodeAndSampleArgs(const Napi::CallbackInfo& info, bool disposed, const char* usage) {
    if (disposed) {
        Napi::Error::New(info.Env(), "Context is disposed").ThrowAsJavaScriptException();
        return false;
    }

    if (info.Length() < 2 || !info[0].IsTypedArray() || !info[1].IsArray()) {
        Napi::TypeError::New(info.Env(), usage).ThrowAsJavaScriptException();
        return false;
    }

    return true;
}

Napi::Value AddonContext::DecodeBatchAndSample(const Napi::CallbackInfo& info) {
    if (!checkDecodeAndSampleArgs(info, disposed, "decodeBatchAndSample(logitIndexes: Uint32Array, samplers: AddonSampler[])")) {
        return info.Env().Undefined();
    }

    AddonContextDecodeBatchAndSampleWorker* worker = new AddonContextDecodeBatchAndSampleWorker(info, this);
    worker->Queue();
    return worker->GetPromise();
}

// The step on the calling thread (node's main thread): no hand-off at all, as llama-server's one thread
// decodes and samples; the event loop waits meanwhile.
Napi::Value AddonContext::DecodeBatchAndSampleSync(const Napi::CallbackInfo& info) {
    if (!checkDecodeAndSampleArgs(info, disposed, "decodeBatchAndSampleSync(logitIndexes: Uint32Array, samplers: AddonSampler[])")) {
        return info.Env().Undefined();
    }

    DecodeAndSampleStep step(info, this);
    const auto err = step.Run();
    step.Release();
    if (!err.empty()) {
        Napi::Error::New(info.Env(), err).ThrowAsJavaScriptException();
        return info.Env().Undefined();
    }

    return step.Result(info.Env());
}

`;

/** AddonContext.cpp with the fused method defined and registered (unchanged when it already is). */
export function patchFusedStep(source: string): string {
  if (source.includes('AddonContext::DecodeBatchAndSample')) return source;
  const out = splice(source, DEFINE_AT, WORKER, 'before', 'AddonContext.cpp');
  return splice(out, REGISTER_AT, '\n' + REGISTER, 'after', 'AddonContext.cpp');
}

/** AddonContext.h with the fused method declared (unchanged when it already is). */
export function patchFusedStepHeader(source: string): string {
  if (source.includes('DecodeBatchAndSample(')) return source;
  return splice(source, DECLARE_AT, '\n' + DECLARE, 'after', 'AddonContext.h');
}
