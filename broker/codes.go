package broker

// Request codes of RocketMQ's remoting protocol that the broker serves.
const (
	reqSendMessage              = 10
	reqPullMessage              = 11
	reqQueryMessage             = 12
	reqQueryConsumerOffset      = 14
	reqUpdateConsumerOffset     = 15
	reqCreateTopic              = 17
	reqGetBrokerRuntimeInfo     = 28
	reqSearchOffsetByTimestamp  = 29
	reqGetMaxOffset             = 30
	reqGetMinOffset             = 31
	reqViewMessageByID          = 33
	reqHeartBeat                = 34
	reqUnregisterClient         = 35
	reqConsumerSendMsgBack      = 36
	reqEndTransaction           = 37
	reqGetConsumerListByGroup   = 38
	reqCheckTransactionState    = 39
	reqNotifyConsumerIdsChanged = 40
	reqLockBatchMQ              = 41
	reqUnlockBatchMQ            = 42
	reqGetRouteInfoByTopic      = 105
	reqGetBrokerClusterInfo     = 106
	reqGetAllTopicList          = 206
	reqSendMessageV2            = 310
	reqSendBatchMessage         = 320
)

// Response codes.
const (
	resSuccess             = 0
	resSystemError         = 1
	resSystemBusy          = 2
	resNotSupported        = 3
	resFlushDiskTimeout    = 10
	resMessageIllegal      = 13
	resServiceNotAvailable = 14
	resNoPermission        = 16
	resTopicNotExist       = 17
	resPullNotFound        = 19
	resPullRetryImmediate  = 20
	resPullOffsetMoved     = 21
	resQueryNotFound       = 22
	resSubscriptionInvalid = 23
)

// Pull request sysFlag bits.
const (
	pullFlagCommitOffset = 1 << 0
	pullFlagSuspend      = 1 << 1
)

// Message sysFlag bits as the client reads them.
const (
	sysCompressed   = 0x1
	sysTxPrepared   = 0x4
	sysTxTypeMask   = 0xC
	sysBornHostV6   = 0x1 << 4
	sysStoreHostV6  = 0x1 << 5
	permReadWrite   = 6
	masterBrokerID  = "0"
	defaultTopicKey = "TBW102"
)
